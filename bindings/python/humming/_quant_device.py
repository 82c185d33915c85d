"""Activation quantization on the device (hm_quantize_activation_device): f16/bf16 activations
in device memory -> 8-bit codes and f32 scales, bit for bit what quantize_activation computes on
the host for the same values."""
import numpy as np

from . import raw
from ._device import check_device_tensor
from ._dtype import as_dtype
from ._errors import argument_error, check

_IN_DTYPES = {"float16": raw.HM_DTYPE_F16, "bfloat16": raw.HM_DTYPE_BF16}


def activation_scale_groups(k, group_k=0):
    """Scales per row: 1 for group_k=0 (per token), else ceil(k / group_k)."""
    status, groups = raw.hm_activation_scale_groups(int(k), int(group_k))
    check(status)
    return int(groups)


def quantize_activation_device(context, a, dtype, *, group_k=0, perm=None, codes=None,
                               scales=None, stream=0):
    """Quantizes activations a [M, K] (float16 or bfloat16, contiguous, on the context's device)
    into `dtype` codes (e4m3, e5m2 or int8) with f32 scales per token (group_k=0) or per token and
    group of group_k columns (a multiple of 8). perm: optional int32 [K] device tensor, output
    column j reads input column perm[j]. codes (uint8 [M, K]) and scales (float32 [M, G]) are
    written in place when given, else allocated as DeviceArrays. Returns (codes, scales).
    Asynchronous on `stream` (an int CUstream; 0: the default stream)."""
    device = context.device
    out_dtype = as_dtype(dtype)
    ta = check_device_tensor(a, "a", device, stream=stream)
    if ta.dtype not in _IN_DTYPES:
        raise argument_error(f"argument 'a' has dtype {ta.dtype}, expected float16 or bfloat16")
    if len(ta.shape) != 2:
        raise argument_error(f"argument 'a' must be 2-D [M, K], got shape {ta.shape}")
    m, k = (int(d) for d in ta.shape)
    groups = activation_scale_groups(k, group_k) if k > 0 else 1
    keep = [ta]
    args = raw.hm_activation_quant_args_t()
    raw.hm_activation_quant_args_init(args)
    args.in_dtype = _IN_DTYPES[ta.dtype]
    args.out_dtype = int(out_dtype)
    args.group_k = int(group_k)
    args.m, args.k, args.a = m, k, ta.ptr
    if perm is not None:
        tp = check_device_tensor(perm, "perm", device, shape=(k,), stream=stream)
        if tp.dtype != "int32":
            raise argument_error(f"argument 'perm' has dtype {tp.dtype}, expected int32")
        keep.append(tp)
        args.perm = tp.ptr
    if codes is None:
        codes = context.empty((m, k), np.uint8)
    if scales is None:
        scales = context.empty((m, groups), np.float32)
    tc = check_device_tensor(codes, "codes", device, shape=(m, k), stream=stream, writable=True)
    if tc.itemsize != 1:
        raise argument_error(f"argument 'codes' has dtype {tc.dtype}, expected uint8 (one code "
                             "per byte)")
    ts = check_device_tensor(scales, "scales", device, shape=(m, groups), stream=stream,
                             writable=True)
    if ts.dtype != "float32":
        raise argument_error(f"argument 'scales' has dtype {ts.dtype}, expected float32")
    keep += [tc, ts]
    args.codes, args.scales = tc.ptr, ts.ptr
    with context.using() as h:
        check(raw.hm_quantize_activation_device(h, args, int(stream)))
    del keep  # the tensors stay alive until the (asynchronous) launch is queued
    return codes, scales
