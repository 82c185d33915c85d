"""Statuses as exceptions: every failing call raises an Error carrying the status code, its name
and the library's thread-local message (read on the calling thread, right after the call)."""
from . import raw


class Error(Exception):
    """A Humming call failed. `status` is the HM_* code, `name` its name without the prefix
    ("ERROR_PARSE"), `message` what the library said (it names the bad argument and the fix)."""

    def __init__(self, status, message, name=None):
        self.status = int(status)
        self.name = name if name is not None else raw.hm_status_name(self.status)
        self.message = message
        super().__init__(f"{self.name} ({self.status}): {message}")

    @property
    def category(self):
        """The band of the status: HM_ERROR_PARSE (1003) -> 1000."""
        return self.status // 1000 * 1000


# One subclass per band of humming.h, each also deriving from the nearest builtin exception so
# that callers who catch ValueError / MemoryError / OSError keep working.
class InvalidArgumentError(Error, ValueError):
    """1000s: the caller passed something wrong."""


class UnsupportedError(Error):
    """2000s: well-formed, but not supported by this build, this device, or at all."""


class DriverError(Error):
    """3000s: the CUDA driver or the device."""


class CompileError(Error):
    """4000s: compiling kernels."""


class CacheError(Error, OSError):
    """5000s: files and the kernel cache."""

    def __str__(self):  # OSError's own __str__ would show only the first argument
        return f"{self.name} ({self.status}): {self.message}"


class OutOfMemoryError(Error, MemoryError):
    """6000s: host or device memory."""


class InternalError(Error):
    """9000s: a bug in Humming; please report it with the message."""


_BY_CATEGORY = {
    raw.HM_ERROR_INVALID_ARGUMENT: InvalidArgumentError,
    raw.HM_ERROR_UNSUPPORTED: UnsupportedError,
    raw.HM_ERROR_DRIVER_NOT_FOUND: DriverError,
    raw.HM_ERROR_COMPILER_NOT_FOUND: CompileError,
    raw.HM_ERROR_IO: CacheError,
    raw.HM_ERROR_OUT_OF_MEMORY: OutOfMemoryError,
    raw.HM_ERROR_INTERNAL: InternalError,
}


def last_error_message():
    """The calling thread's last error message ("" when there is none)."""
    length, text = raw.hm_last_error_message(0)
    if length == 0:
        return ""
    _, text = raw.hm_last_error_message(length + 1)
    return text


def error_for(status, message=None):
    """The exception for a failed status; without `message`, the thread's last message."""
    if message is None:
        message = last_error_message() or "(the library left no message)"
    cls = _BY_CATEGORY.get(status // 1000 * 1000, Error)
    return cls(status, message)


def check(status):
    """Raises the matching Error unless status is HM_SUCCESS. Call it on the same thread, right
    after the C call, before any other Humming call: the message is thread-local."""
    if status != raw.HM_SUCCESS:
        raise error_for(status)


def argument_error(message, status=raw.HM_ERROR_INVALID_ARGUMENT):
    """An Error raised by the Python layer's own checks, with the same shape as the library's."""
    return error_for(status, message)


def copy_out(function, *args):
    """Calls a function that copies a string out by the snprintf rule and returns the text."""
    status, text, length = function(*args, 256)
    if status == raw.HM_ERROR_BUFFER_TOO_SMALL:
        status, text, length = function(*args, length + 1)
    check(status)
    return text
