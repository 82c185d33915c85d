"""The base of every object that owns a C handle: close() is explicit and idempotent, `with`
closes on exit, and garbage collection closes what was forgotten."""
from ._errors import argument_error
from . import raw


class Handle:
    _destroy = None  # the hm_*_destroy function of the subclass

    def __init__(self, handle):
        self._handle = handle

    @property
    def closed(self):
        return self._handle is None

    def close(self):
        """Destroys the C object now; later calls that need it raise INVALID_STATE."""
        handle, self._handle = getattr(self, "_handle", None), None
        if handle is not None:
            type(self)._destroy(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: modules may already be gone
            pass

    @property
    def handle(self):
        """The raw SWIG handle, for humming.raw calls."""
        if self._handle is None:
            raise argument_error(f"this {type(self).__name__} is closed",
                                 raw.HM_ERROR_INVALID_STATE)
        return self._handle
