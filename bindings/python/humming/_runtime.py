"""Contexts (a device, or a target arch without one), kernels, launch parameters, device memory."""
import contextlib
import os
import threading
from dataclasses import dataclass

from . import raw
from ._device import DeviceArray, check_device_tensor, pointer_of
from ._dtype import as_dtype
from ._errors import argument_error, check, copy_out
from ._handle import Handle
from ._host import as_array

NO_DEVICE = raw.HM_NO_DEVICE
_COMPILERS = {"default": raw.HM_COMPILER_DEFAULT, "nvrtc": raw.HM_COMPILER_NVRTC,
              "nvcc": raw.HM_COMPILER_NVCC}


@dataclass(frozen=True)
class DeviceInfo:
    device: int
    cc_major: int
    cc_minor: int
    name: str
    arch: str
    multiprocessors: int
    shared_memory_per_block_optin: int
    l2_cache_bytes: int
    total_memory_bytes: int


@dataclass(frozen=True)
class RuntimeInfo:
    driver_version: int
    device_count: int
    driver_path: str
    driver_error: str
    nvrtc_version: int
    nvrtc_path: str
    nvrtc_error: str
    nvcc_path: str
    nvcc_version: str
    kernel_sources: str
    cache_dir: str
    cache_bytes: int
    cache_entries: int


def _fields(struct, cls):
    return cls(**{name: getattr(struct, name) for name in cls.__dataclass_fields__})


def runtime_info():
    """What the library found on this machine: driver, devices, compilers, cache."""
    info = raw.hm_runtime_info_t()
    raw.hm_runtime_info_init(info)
    check(raw.hm_runtime_info(info))
    return _fields(info, RuntimeInfo)


def cache_prune(max_age_seconds=0, max_bytes=None, directory=None):
    """Trims the kernel cache: removes the entries not used for max_age_seconds (0: no age
    limit), then the least recently used ones while the cache takes more than max_bytes (None:
    no size limit). directory None: the default cache. Returns (entries, bytes) removed."""
    status, entries, removed = raw.hm_cache_prune(
        None if directory is None else os.fspath(directory), int(max_age_seconds),
        (1 << 64) - 1 if max_bytes is None else int(max_bytes))
    check(status)
    return int(entries), int(removed)


class Context(Handle):
    """A device (its ordinal), or with device=None a target arch to compile for ahead of time.

    Kernels and plans keep the context's state alive, so they may be closed in any order."""

    _destroy = staticmethod(raw.hm_context_destroy)

    def __init__(self, device=0, *, target_arch=None, cache_dir=None, compiler="default",
                 disable_jit=False, no_cache=False):
        # Calls through the handle run with the GIL released, so without a guard close() on one
        # thread could destroy it while another thread (or a DeviceArray's __del__) is inside a
        # call: calls hold it through using(), and close() waits for them.
        self._idle = threading.Condition()
        self._in_flight = 0
        options = raw.hm_context_options_t()
        raw.hm_context_options_init(options)
        options.device = NO_DEVICE if device is None else int(device)
        if target_arch is not None:
            options.target_arch = str(target_arch)
        if cache_dir is not None:
            options.cache_dir = str(cache_dir)
        if compiler not in _COMPILERS:
            raise argument_error(f"argument 'compiler' is {compiler!r}; expected one of "
                                 f"{', '.join(_COMPILERS)}")
        options.compiler = _COMPILERS[compiler]
        options.flags = ((raw.HM_CONTEXT_DISABLE_JIT if disable_jit else 0)
                         | (raw.HM_CONTEXT_NO_CACHE if no_cache else 0))
        status, handle = raw.hm_context_create(options)
        check(status)
        super().__init__(handle)
        self.device = options.device

    @contextlib.contextmanager
    def using(self):
        """The raw handle, for humming.raw calls, valid until the with-block ends: close() on
        another thread waits for the block (INVALID_STATE if the context is already closed)."""
        with self._idle:
            handle = self.handle
            self._in_flight += 1
        try:
            yield handle
        finally:
            with self._idle:
                self._in_flight -= 1
                if self._in_flight == 0:
                    self._idle.notify_all()

    def close(self):
        """Destroys the context handle once the calls in flight on other threads have returned;
        no call starts after close() has begun. Idempotent."""
        idle = getattr(self, "_idle", None)
        if idle is None:  # __init__ did not get far enough to own anything
            return
        with idle:
            handle, self._handle = getattr(self, "_handle", None), None
            while self._in_flight:
                idle.wait()
        if handle is not None:
            raw.hm_context_destroy(handle)

    def device_info(self):
        info = raw.hm_device_info_t()
        raw.hm_device_info_init(info)
        with self.using() as h:
            check(raw.hm_context_device_info(h, info))
        return _fields(info, DeviceInfo)

    @property
    def arch(self):
        return self.device_info().arch

    # ---- kernels and plans -------------------------------------------------------------------
    def reference_gemm_kernel(self, in_dtype="f16", out_dtype="f16"):
        """The plain reference GEMM (compiled through the cache; the GIL is released)."""
        with self.using() as h:
            status, handle = raw.hm_kernel_create_reference_gemm(
                h, int(as_dtype(in_dtype)), int(as_dtype(out_dtype)))
        check(status)
        return Kernel(self, handle, as_dtype(in_dtype), as_dtype(out_dtype))

    def plan(self, format, **options):
        from ._plan import Plan
        return Plan(self, format, **options)

    # ---- device memory -------------------------------------------------------------------------
    def alloc(self, nbytes):
        """Raw device memory (an int address); free it with free(). See also empty()."""
        with self.using() as h:
            status, ptr = raw.hm_device_alloc(h, int(nbytes))
        check(status)
        return ptr

    def free(self, ptr):
        with self.using() as h:
            check(raw.hm_device_free(h, int(ptr)))

    def copy_to_device(self, dst, src, nbytes):
        """Synchronous copy of nbytes from host address src to device address dst."""
        with self.using() as h:
            check(raw.hm_copy_to_device(h, int(dst), int(src), int(nbytes)))

    def copy_to_host(self, dst, src, nbytes):
        with self.using() as h:
            check(raw.hm_copy_to_host(h, int(dst), int(src), int(nbytes)))

    def empty(self, shape, dtype):
        """An uninitialized DeviceArray."""
        return DeviceArray(self, shape, dtype)

    def to_device(self, host):
        """A DeviceArray holding a copy of a host array (any buffer-protocol object)."""
        arr = as_array(host, "host")
        return DeviceArray(self, arr.shape, arr.dtype).copy_from(arr)

    def synchronize(self, stream=0):
        """Waits for the work on `stream` (an int CUstream, or 0 for the default stream)."""
        with self.using() as h:
            check(raw.hm_stream_synchronize(h, int(stream)))


class LaunchParams(Handle):
    """Launch arguments by slot (humming.ARG_*). Not thread-safe: one per thread.

    LaunchParams(a=ptr, b=tensor, m=16, ...) sets slots by name; pointer slots take ints or
    device tensors (their address is read, nothing else is checked here)."""

    _destroy = staticmethod(raw.hm_launch_params_destroy)

    def __init__(self, **slots):
        status, handle = raw.hm_launch_params_create()
        check(status)
        super().__init__(handle)
        self.set(**slots)

    def set(self, **slots):
        for key, value in slots.items():
            slot = getattr(raw, "HM_ARG_" + key.upper(), None)
            if slot is None:
                raise argument_error(f"unknown launch slot {key!r}; the slots are the HM_ARG_* "
                                     "names in lower case (a, b, c, bias, scales, zeros, global, "
                                     "workspace, sorted_ids, expert_ids, num_tokens_padded, "
                                     "act_scales, m, n, k, workspace_bytes, top_k)")
            if slot >= raw.HM_ARG_M:
                self.set_int(slot, value)
            else:
                self.set_pointer(slot, value)
        return self

    def set_pointer(self, slot, pointer):
        check(raw.hm_launch_params_set_pointer(self.handle, int(slot), pointer_of(pointer, "pointer")))

    def set_int(self, slot, value):
        check(raw.hm_launch_params_set_int(self.handle, int(slot), int(value)))

    def clear(self):
        check(raw.hm_launch_params_clear(self.handle))


class Kernel(Handle):
    """One compiled kernel (today: the reference GEMM)."""

    _destroy = staticmethod(raw.hm_kernel_destroy)

    def __init__(self, context, handle, in_dtype, out_dtype):
        super().__init__(handle)
        self.context = context
        self.in_dtype = in_dtype
        self.out_dtype = out_dtype
        self._local = threading.local()

    @property
    def name(self):
        return copy_out(raw.hm_kernel_name, self.handle)

    @property
    def cache_key(self):
        return copy_out(raw.hm_kernel_cache_key, self.handle)

    def launch(self, params, stream=0):
        """Launches with explicit LaunchParams on `stream` (asynchronous)."""
        check(raw.hm_kernel_launch(self.handle, params.handle, int(stream)))

    def __call__(self, a, b, c, stream=0):
        """C[M,N] = A[M,K] * B[N,K]^T on `stream`, with device tensors checked against the
        kernel's dtypes and each other's shapes. Asynchronous."""
        device = self.context.device
        ta = check_device_tensor(a, "a", device, self.in_dtype, stream=stream)
        if len(ta.shape) != 2:
            raise argument_error(f"argument 'a' must be 2-D [M, K], got shape {ta.shape}")
        m, k = ta.shape
        tb = check_device_tensor(b, "b", device, self.in_dtype, stream=stream)
        if len(tb.shape) != 2 or tb.shape[1] != k:
            raise argument_error(f"argument 'b' has shape {tb.shape}, expected [N, {k}]")
        n = tb.shape[0]
        tc = check_device_tensor(c, "c", device, self.out_dtype, shape=(m, n), stream=stream,
                                 writable=True)
        params = getattr(self._local, "params", None)
        if params is None:
            params = self._local.params = LaunchParams()
        params.set(a=ta.ptr, b=tb.ptr, c=tc.ptr, m=m, n=n, k=k)
        self.launch(params, stream)

