"""Packing on the device (hm_pack_device): canonical codes already in device memory -> the
standard layout, for packing at load time ("pack on load") without a round trip through the host."""
import numpy as np

from . import raw
from ._device import check_device_tensor
from ._errors import argument_error, check
from ._format import Format
from ._plan import DevicePackedWeight


def _element_bytes(dtype):
    bits = int(dtype) & 0xFF
    return 1 if bits <= 8 else 2 if bits <= 16 else 4


def _side(value, name, device, nbytes, element, stream):
    """A side tensor's device address after its checks: contiguous, exactly nbytes, and held in
    elements of the packed size (any tensor dtype of that width: f16/bf16 codes as float16,
    bfloat16 or int16, 8-bit codes as uint8, int8 or float8, f32 as float32)."""
    t = check_device_tensor(value, name, device, stream=stream)
    if t.itemsize != element:
        raise argument_error(f"argument '{name}' has {t.itemsize}-byte elements ({t.dtype}); "
                             f"the format's codes take {element} bytes each")
    if t.nbytes != nbytes:
        raise argument_error(f"argument '{name}' has {t.nbytes} bytes, the format needs {nbytes}")
    return t


def pack_device(context, format, codes, *, scales=None, zero_points=None, global_scale=None,
                out=None, stream=0):
    """Packs canonical buffers that are already on the context's device; returns the
    DevicePackedWeight it wrote (`out`, or new DeviceArrays).

    codes: uint8 (or int8) codes, one per byte, [E, N, K] or [N, K]. scales / zero_points: the
    dtype's codes (not float values) in canonical order [E][R][G], one element of the packed size
    each (see hm_pack_device in humming.h). global_scale: float32 [E]. A side tensor the format has
    is packed only when given; it is then required in `out` too. The weight is byte for byte what
    Format.pack writes. Asynchronous on `stream` (an int CUstream; 0: the default stream)."""
    if not isinstance(format, Format):
        format = Format(format)
    device = context.device
    canonical, packed = format.canonical_sizes(), format.packed_sizes()
    tc = check_device_tensor(codes, "codes", device, stream=stream)
    if tc.dtype not in ("uint8", "int8"):
        raise argument_error(f"argument 'codes' has dtype {tc.dtype}, expected uint8 (one code "
                             "per byte)")
    if tc.nbytes != canonical.codes:
        raise argument_error(f"argument 'codes' has {tc.nbytes} codes, the format has "
                             f"{canonical.codes}")
    din = raw.hm_device_canonical_t()
    raw.hm_device_canonical_init(din)
    din.codes = tc.ptr
    given = {"scales": scales, "zero_points": zero_points, "global_scale": global_scale}
    elements = {"scales": _element_bytes(format.scale_dtype) if canonical.scales else 0,
                "zero_points": _element_bytes(format.zero_point) if canonical.zero_points else 0,
                "global_scale": 4}
    keep = [tc]
    for field, value in given.items():
        count = getattr(canonical, field)
        if value is None:
            continue
        if not count:
            raise argument_error(f"argument '{field}' was given, but the format has none")
        t = _side(value, field, device, count * elements[field], elements[field], stream)
        keep.append(t)
        setattr(din, field, t.ptr)

    if out is None:
        out = DevicePackedWeight(context.empty(packed.weight, np.uint8))
        for field in given:
            if given[field] is not None:
                dtype = np.float32 if field == "global_scale" else np.uint8
                count = getattr(packed, field) // np.dtype(dtype).itemsize
                setattr(out, field, context.empty(count, dtype))
    dout = raw.hm_device_packed_t()
    raw.hm_device_packed_init(dout)
    for field in ("weight", "scales", "zero_points", "global_scale"):
        value = getattr(out, field)
        if value is None or (field != "weight" and given[field] is None):
            continue
        t = check_device_tensor(value, "out." + field, device, min_bytes=getattr(packed, field),
                                stream=stream, writable=True)
        keep.append(t)
        setattr(dout, field, t.ptr)
    with context.using() as h:
        check(raw.hm_pack_device(h, format.handle, din, dout, int(stream)))
    del keep  # the tensors stay alive until the (asynchronous) launch is queued
    return out
