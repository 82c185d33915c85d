"""Host quantization, packing and the reference GEMM with numpy arrays (and other buffer-protocol
objects): results, and the checks on dtype, shape, contiguity and writability."""
import array

import numpy as np
import pytest

import humming
from humming import DType, Format

RNG = np.random.default_rng(1234)


def group_scales(canonical, fmt):
    n, k, _ = fmt.shape
    group_k = fmt.scale.group_k
    return np.repeat(canonical.scales.reshape(n, k // group_k), group_k, axis=1)


def test_quantize_pack_unpack_dequantize():
    fmt = Format("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=512")
    w = RNG.standard_normal((256, 512)).astype(np.float32)
    q = fmt.quantize(w)
    assert q.codes.dtype == np.uint8 and q.codes.size == 256 * 512 and q.codes.max() <= 15
    assert q.zero_points is None and q.global_scale is None
    packed = fmt.pack(q)
    assert packed.weight.nbytes == fmt.packed_sizes().weight
    back = fmt.unpack(packed)
    np.testing.assert_array_equal(back.codes, q.codes)
    np.testing.assert_array_equal(back.scales, q.scales)
    d = fmt.dequantize(q)
    assert d.shape == (256, 512) and d.dtype == np.float32
    # Rounding to the nearest code: never more than half a step (the group's scale) off.
    step = group_scales(q, fmt)
    assert np.all(np.abs(d - w) <= 0.5 * step * (1 + 1e-3) + 1e-7)
    np.testing.assert_array_equal(fmt.dequantize(back), d)


def test_quantize_f16_and_bf16_sources_match_their_f32_values():
    fmt = Format("w=int8 a=f16 c=f16 s=f16:channel n=64 k=128")
    w16 = RNG.standard_normal((64, 128)).astype(np.float16)
    q16 = fmt.quantize(w16)
    q32 = fmt.quantize(w16.astype(np.float32))
    np.testing.assert_array_equal(q16.codes, q32.codes)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    wbf = w16.astype(np.float32).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(fmt.quantize(wbf).codes,
                                  fmt.quantize(wbf.astype(np.float32)).codes)


def test_experts_shape():
    fmt = Format("w=uint4b8 a=f16 s=f16:g128 n=64 k=128 e=3")
    w = RNG.standard_normal((3, 64, 128)).astype(np.float32)
    assert fmt.dequantize(fmt.quantize(w)).shape == (3, 64, 128)
    with pytest.raises(humming.InvalidArgumentError, match=r"shape \(64, 128\), expected \(3, 64, 128\)"):
        fmt.quantize(w[0])


def test_host_argument_checks_name_the_argument():
    fmt = Format("w=uint4b8 a=f16 s=f16:g128 n=64 k=128")
    with pytest.raises(humming.InvalidArgumentError, match="'weight' has dtype float64"):
        fmt.quantize(np.zeros((64, 128)))
    with pytest.raises(humming.InvalidArgumentError, match="'weight' has shape"):
        fmt.quantize(np.zeros((64, 64), np.float32))
    with pytest.raises(humming.InvalidArgumentError, match="not C-contiguous"):
        fmt.quantize(np.zeros((128, 64), np.float32).T)
    with pytest.raises(humming.InvalidArgumentError, match="no buffer protocol"):
        fmt.quantize([[0.0] * 128] * 64)
    q = fmt.quantize(np.zeros((64, 128), np.float32))
    q.scales = None
    with pytest.raises(humming.InvalidArgumentError, match="'scales' is None"):
        fmt.pack(q)
    q = fmt.quantize(np.zeros((64, 128), np.float32))
    q.codes.flags.writeable = False
    fmt.pack(q)  # reading a read-only buffer is fine
    out = fmt.empty_canonical()
    out.codes.flags.writeable = False
    with pytest.raises(humming.InvalidArgumentError, match="read-only"):
        fmt._canonical_struct(out, writable=True)


def test_nan_weight_is_reported_by_the_library():
    fmt = Format("w=uint4b8 a=f16 s=f16:g128 n=64 k=128")
    w = np.zeros((64, 128), np.float32)
    w[3, 5] = np.nan
    with pytest.raises(humming.InvalidArgumentError) as info:
        fmt.quantize(w)
    assert info.value.status == humming.ERROR_NON_FINITE


def test_buffer_protocol_objects_are_accepted_without_numpy_arrays():
    a = array.array("f", [1, 2, 3, 4, 5, 6])  # 2 x 3 once shaped; array.array is 1-D
    w = memoryview(array.array("f", [1] * 12)).cast("B").cast("f", (4, 3))
    c = humming.reference_gemm(memoryview(a).cast("B").cast("f", (2, 3)), w)
    np.testing.assert_array_equal(c, [[6] * 4, [15] * 4])


def test_reference_gemm_matches_numpy():
    a = RNG.standard_normal((7, 33)).astype(np.float32)
    w = RNG.standard_normal((5, 33)).astype(np.float32)
    bias = RNG.standard_normal(5).astype(np.float32)
    expected = a.astype(np.float64) @ w.astype(np.float64).T + bias
    np.testing.assert_allclose(humming.reference_gemm(a, w, bias), expected, rtol=1e-6, atol=1e-6)
    with pytest.raises(humming.InvalidArgumentError, match="'w' has shape"):
        humming.reference_gemm(a, np.ascontiguousarray(w[:, :32]))


def test_activation_quantization_round_trip():
    a = RNG.standard_normal((5, 64)).astype(np.float32)
    codes, scales = humming.quantize_activation("int8", a)
    assert codes.shape == (5, 64) and scales.shape == (5, 1)
    back = humming.dequantize_activation("int8", codes, scales, k=64)
    assert np.all(np.abs(back - a) <= 0.5 * scales * (1 + 1e-3))
    codes4, scales4 = humming.quantize_activation(DType.E2M1, a, group_k=32)
    assert codes4.shape == (5, 32) and scales4.shape == (5, 2)
    back4 = humming.dequantize_activation(DType.E2M1, codes4, scales4, k=64, group_k=32)
    assert back4.shape == (5, 64)
    assert np.abs(back4 - a).max() < np.abs(a).max()  # coarse, but computed from the codes
    with pytest.raises(humming.UnsupportedError, match="f16 cannot be quantized"):
        humming.quantize_activation("f16", a)  # not an activation-quantization dtype
