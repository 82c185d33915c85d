"""Device tensors from other libraries, and device arrays of our own.

A device argument may be a torch tensor (read through data_ptr(), dtype, shape, stride(),
device), any object with __cuda_array_interface__ (CuPy, Numba, our DeviceArray), or any object
with __dlpack__ / __dlpack_device__ (JAX, CuPy, torch, ...). Each is reduced to a DeviceTensor,
then checked for device, dtype, shape and contiguity with errors that name the argument."""
import ctypes
from dataclasses import dataclass, field
from typing import Any, Optional, Tuple

import numpy as np

from . import raw
from ._dtype import DType
from ._errors import argument_error

# ---- dtype names: one spelling (torch's / numpy's) for every source ---------------------------
_HM_TO_NAME = {
    int(DType.F32): "float32",
    int(DType.F16): "float16",
    int(DType.BF16): "bfloat16",
    int(DType.E4M3): "float8_e4m3fn",
    int(DType.E5M2): "float8_e5m2",
    int(DType.INT8): "int8",
    int(DType.UINT8): "uint8",
}
_TYPESTR = {"<f4": "float32", "<f2": "float16", "|u1": "uint8", "|i1": "int8", "<i4": "int32",
            "<i8": "int64", "<i2": "int16", "<u4": "uint32"}
_NAME_TO_TYPESTR = {v: k for k, v in _TYPESTR.items()}

# DLPack (dlpack.h) type codes and the float8/float4 codes of DLPack 1.1.
_DL_CODES = {(0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64",
             (1, 8): "uint8", (1, 16): "uint16", (1, 32): "uint32", (1, 64): "uint64",
             (2, 16): "float16", (2, 32): "float32", (2, 64): "float64", (4, 16): "bfloat16",
             (10, 8): "float8_e4m3fn", (12, 8): "float8_e5m2", (17, 4): "float4_e2m1fn"}
_DL_DEVICES = {1: "cpu", 2: "cuda", 3: "cuda_host", 13: "cuda_managed"}
_KDL_CUDA = 2
_KDL_CUDA_MANAGED = 13


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


@dataclass
class DeviceTensor:
    """What the checks need to know about a tensor; `keepalive` holds what keeps `ptr` valid
    (a DLPack capsule, the tensor itself) for as long as this object lives."""
    ptr: int
    shape: Tuple[int, ...]
    dtype: str                  # "float16", "uint8", ...
    device: str                 # "cuda", "cpu", ...
    index: Optional[int]        # the device ordinal, None when the source does not say
    strides: Optional[Tuple[int, ...]] = None  # in elements; None: C-contiguous
    readonly: bool = False
    itemsize: int = 1
    keepalive: Any = field(default=None, repr=False)

    @property
    def nbytes(self):
        return int(np.prod(self.shape, dtype=np.int64)) * self.itemsize

    @property
    def contiguous(self):
        if self.strides is None:
            return True
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(self.strides)):
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True


def _itemsize(name):
    if name == "float4_e2m1fn":
        return 1  # packed two per byte by every producer that has it
    if name in ("bfloat16",):
        return 2
    if name.startswith("float8"):
        return 1
    return np.dtype(name).itemsize


def _from_torch(t):
    name = str(t.dtype).replace("torch.", "")
    return DeviceTensor(ptr=int(t.data_ptr()), shape=tuple(int(d) for d in t.shape), dtype=name,
                        device=t.device.type, index=t.device.index,
                        strides=tuple(int(s) for s in t.stride()), itemsize=int(t.element_size()),
                        keepalive=t)


def _from_cuda_array_interface(obj):
    cai = obj.__cuda_array_interface__
    typestr = cai["typestr"]
    name = _TYPESTR.get(typestr)
    if name is None:
        name = np.dtype(typestr).name
    itemsize = np.dtype(typestr).itemsize
    strides = cai.get("strides")
    if strides is not None:
        if any(s % itemsize for s in strides):
            raise argument_error(f"strides {strides} are not multiples of the item size {itemsize}")
        strides = tuple(s // itemsize for s in strides)
    ptr, readonly = cai["data"]
    return DeviceTensor(ptr=int(ptr or 0), shape=tuple(int(d) for d in cai["shape"]), dtype=name,
                        device="cuda", index=None, strides=strides, readonly=bool(readonly),
                        itemsize=itemsize, keepalive=obj)


def _from_dlpack(obj, stream):
    device_type, device_id = obj.__dlpack_device__()
    if device_type in (_KDL_CUDA, _KDL_CUDA_MANAGED):
        # The producer orders its pending work before `stream` (1 is the legacy default stream).
        capsule = obj.__dlpack__(stream=stream if stream else 1)
    else:
        capsule = obj.__dlpack__()
    address = _capsule_pointer(capsule, b"dltensor")
    # DLManagedTensor starts with its DLTensor; the capsule stays unconsumed, so its destructor
    # releases the producer's reference when this DeviceTensor (which keeps it) is dropped.
    t = _DLTensor.from_address(address)
    key = (t.dtype.code, t.dtype.bits)
    name = _DL_CODES.get(key, f"dlpack(code={key[0]}, bits={key[1]})")
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
    itemsize = max(1, t.dtype.bits * t.dtype.lanes // 8)
    return DeviceTensor(ptr=(t.data or 0) + t.byte_offset, shape=shape, dtype=name,
                        device=_DL_DEVICES.get(t.device.device_type, f"dlpack:{t.device.device_type}"),
                        index=t.device.device_id, strides=strides, itemsize=itemsize,
                        keepalive=(capsule, obj))


def device_tensor(obj, name, stream=0):
    """Reduces a tensor from any supported source to a DeviceTensor (no checks yet)."""
    if isinstance(obj, DeviceTensor):
        return obj
    module = type(obj).__module__ or ""
    if module.startswith("torch") and hasattr(obj, "data_ptr"):
        return _from_torch(obj)
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_cuda_array_interface(obj)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return _from_dlpack(obj, stream)
    raise argument_error(
        f"argument '{name}' is a {type(obj).__name__}; expected a device tensor (a torch tensor, "
        "an object with __cuda_array_interface__ or __dlpack__, or a humming.DeviceArray)")


def expected_name(dtype):
    """The tensor dtype name of a Humming dtype, or None for sub-byte dtypes (held as bytes)."""
    return _HM_TO_NAME.get(int(dtype))


def check_device_tensor(obj, name, device, dtype=None, shape=None, min_bytes=None, stream=0,
                        writable=False):
    """Checks one device argument and returns its DeviceTensor.

    device: the context's ordinal; dtype: a Humming dtype (sub-byte dtypes are accepted as
    uint8/int8 bytes: pass shape in bytes then; e4m3/e5m2 also as uint8 codes); shape: the exact shape; min_bytes: the least
    size for opaque buffers (packed weights, workspace)."""
    t = device_tensor(obj, name, stream)
    if t.device not in ("cuda", "cuda_managed"):
        raise argument_error(f"argument '{name}' is in {t.device} memory; expected memory of CUDA "
                             f"device {device} (dtype {t.dtype}, shape {t.shape})",
                             raw.HM_ERROR_WRONG_DEVICE)
    if t.index is not None and device is not None and device >= 0 and t.index != device:
        raise argument_error(f"argument '{name}' is on cuda:{t.index}, but the context is on "
                             f"cuda:{device}", raw.HM_ERROR_WRONG_DEVICE)
    if dtype is not None:
        wanted = expected_name(dtype)
        if wanted is None:
            ok = t.dtype in ("uint8", "int8")
            what = "uint8 (sub-byte codes packed two per byte)"
        elif wanted.startswith("float8"):
            # fp8 codes also come as plain bytes: quantize_activation_device writes uint8, and
            # sources without float8 types (numpy, __cuda_array_interface__) have nothing else.
            ok = t.dtype in (wanted, "uint8")
            what = f"{wanted} or uint8 (one code per byte)"
        elif wanted == "int8":
            # int8 codes come as int8 or as the bytes quantize_activation_device writes (uint8).
            ok = t.dtype in ("int8", "uint8")
            what = "int8 or uint8 (one code per byte)"
        else:
            ok = t.dtype == wanted
            what = wanted
        if not ok:
            raise argument_error(f"argument '{name}' has dtype {t.dtype}, expected {what} "
                                 f"(the format's {DType(dtype).name})")
    if not t.contiguous:
        raise argument_error(f"argument '{name}' is not contiguous (strides {t.strides} for shape "
                             f"{t.shape}); pass a row-major contiguous tensor (.contiguous())")
    if shape is not None and tuple(t.shape) != tuple(int(d) for d in shape):
        raise argument_error(f"argument '{name}' has shape {t.shape}, expected {tuple(shape)}")
    if min_bytes is not None and t.nbytes < min_bytes:
        raise argument_error(f"argument '{name}' has {t.nbytes} bytes, needs at least {min_bytes}")
    if writable and t.readonly:
        raise argument_error(f"argument '{name}' is read-only, but the kernel writes into it")
    if t.ptr == 0 and t.nbytes:
        raise argument_error(f"argument '{name}' has a NULL data pointer")
    return t


def pointer_of(obj, name, stream=0):
    """The device address of an int, a DeviceTensor source or None (0), without dtype checks."""
    if obj is None:
        return 0
    if isinstance(obj, int):
        return obj
    return device_tensor(obj, name, stream).ptr


class DeviceArray:
    """Device memory from hm_device_alloc with a numpy dtype and shape. It has
    __cuda_array_interface__, so every device argument accepts it; close() frees it."""

    def __init__(self, context, shape, dtype):
        self.ptr = None
        self.context = context
        self.shape = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        self.dtype = np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self.ptr = context.alloc(max(self.nbytes, 1))

    @property
    def __cuda_array_interface__(self):
        if self.ptr is None:
            raise argument_error("this DeviceArray is closed", raw.HM_ERROR_INVALID_STATE)
        typestr = _NAME_TO_TYPESTR.get(self.dtype.name, self.dtype.str)
        return {"shape": self.shape, "typestr": typestr, "data": (self.ptr, False),
                "strides": None, "version": 3}

    def copy_from(self, host):
        """Copies a host array of the same dtype and size into this device memory."""
        from ._host import host_array
        arr, addr = host_array(host, "host", self.dtype, count=int(np.prod(self.shape)))
        self.context.copy_to_device(self.ptr, addr, self.nbytes)
        return self

    def numpy(self):
        """A host copy."""
        out = np.empty(self.shape, self.dtype)
        self.context.copy_to_host(out.__array_interface__["data"][0], self.ptr, self.nbytes)
        return out

    def close(self):
        ptr, self.ptr = self.ptr, None
        if ptr is not None and self.context is not None and not self.context.closed:
            self.context.free(ptr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype.name}, ptr=0x{self.ptr or 0:x})"
