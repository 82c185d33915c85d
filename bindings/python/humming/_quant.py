"""Host references: the f64-accumulating reference GEMM and activation quantization."""
import numpy as np

from . import raw
from ._dtype import as_dtype
from ._errors import argument_error, check
from ._host import as_array, host_array


def reference_gemm(a, w, bias=None):
    """C[M,N] = A[M,K] * W[N,K]^T (+ bias[N]) on the host, float32 in and out, f64 sums."""
    a_arr = as_array(a, "a")
    w_arr = as_array(w, "w")
    if a_arr.ndim != 2 or w_arr.ndim != 2:
        raise argument_error(f"arguments 'a' and 'w' must be 2-D, got shapes {a_arr.shape} and "
                             f"{w_arr.shape}")
    m, k = a_arr.shape
    n = w_arr.shape[0]
    _, a_ptr = host_array(a_arr, "a", np.float32, shapes=[(m, k)])
    _, w_ptr = host_array(w_arr, "w", np.float32, shapes=[(n, k)])
    bias_ptr = 0
    if bias is not None:
        _, bias_ptr = host_array(bias, "bias", np.float32, shapes=[(n,)])
    c = np.empty((m, n), np.float32)
    check(raw.hm_reference_gemm_f32(a_ptr, w_ptr, bias_ptr, c.__array_interface__["data"][0],
                                    m, n, k))
    return c


def _activation_shapes(dtype, m, k, group_k):
    bits = int(dtype) & 0xFF
    code_cols = k if bits == 8 else (k + 1) // 2
    groups = 1 if group_k == 0 else -(-k // group_k)
    return (m, code_cols), (m, groups)


def quantize_activation(dtype, a, group_k=0):
    """Quantizes f32 activations a[M,K] to `dtype` (e4m3, e5m2, int8, int4, e2m1) with one f32
    scale per token (group_k=0) or per token and group of group_k. Returns (codes, scales):
    codes uint8 [M,K] (4-bit dtypes: [M,ceil(K/2)], even k in the low nibble), scales f32."""
    dtype = as_dtype(dtype)
    arr = as_array(a, "a")
    if arr.ndim != 2:
        raise argument_error(f"argument 'a' must be 2-D [M, K], got shape {arr.shape}")
    m, k = arr.shape
    _, a_ptr = host_array(arr, "a", np.float32, shapes=[(m, k)])
    code_shape, scale_shape = _activation_shapes(dtype, m, k, int(group_k))
    codes = np.zeros(code_shape, np.uint8)
    scales = np.zeros(scale_shape, np.float32)
    check(raw.hm_quantize_activation(int(dtype), a_ptr, m, k, int(group_k),
                                     codes.__array_interface__["data"][0],
                                     scales.__array_interface__["data"][0]))
    return codes, scales


def dequantize_activation(dtype, codes, scales, k, group_k=0):
    """The inverse of quantize_activation: f32 [M,K]."""
    dtype = as_dtype(dtype)
    codes_arr = as_array(codes, "codes")
    if codes_arr.ndim != 2:
        raise argument_error(f"argument 'codes' must be 2-D, got shape {codes_arr.shape}")
    m = codes_arr.shape[0]
    code_shape, scale_shape = _activation_shapes(dtype, m, int(k), int(group_k))
    _, codes_ptr = host_array(codes_arr, "codes", np.uint8, shapes=[code_shape])
    _, scales_ptr = host_array(scales, "scales", np.float32, shapes=[scale_shape])
    out = np.empty((m, int(k)), np.float32)
    check(raw.hm_dequantize_activation(int(dtype), codes_ptr, scales_ptr, m, int(k), int(group_k),
                                       out.__array_interface__["data"][0]))
    return out
