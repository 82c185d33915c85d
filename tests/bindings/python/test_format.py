"""Dtypes and formats through the Pythonic layer."""
import copy

import pytest

import humming
from humming import DType, Format, raw


def test_dtype_constants_match_parse():
    for name in ("f32", "f16", "bf16", "e4m3", "e5m2", "e2m1", "ue8m0", "int8", "int4", "uint4",
                 "uint4b8", "uint8"):
        d = DType(name)
        assert d == getattr(DType, name.upper())
        assert d.name == name
        assert DType(int(d)) == d
    assert DType("fp16") == DType.F16 and DType("half") == DType.F16
    assert DType.F16.bits == 16 and DType.INT4.kind == raw.HM_DTYPE_KIND_SINT


def test_dtype_decode_encode_round_trip_every_e4m3_code():
    e4m3 = DType.E4M3
    for code in range(256):
        value = e4m3.decode(code)
        if value != value:  # NaN codes
            continue
        back = e4m3.encode(value)
        assert e4m3.decode(back) == value
    assert e4m3.decode(0x38) == 1.0
    assert e4m3.encode(1e9) == 0x7E  # saturates to the largest finite (448)


def test_bad_dtype_raises_parse_error():
    with pytest.raises(humming.InvalidArgumentError) as info:
        DType("f17")
    assert info.value.status == raw.HM_ERROR_PARSE and "f17" in info.value.message


def test_default_format_and_round_trip():
    f = Format()
    assert (f.weight, f.activation, f.output) == (DType.UINT4B8, DType.F16, DType.F16)
    text = "w=int4 a=bf16 c=bf16 s=bf16:g64 zp=none bias=1 acc=f32 n=512 k=1024 e=1"
    g = Format(text)
    assert str(g) == text
    assert Format(str(g)) == g
    assert g != f
    assert g.scale == humming.Scale(raw.HM_SCALE_GROUP, 64, 0)
    assert g.shape == (512, 1024, 1) and g.bias
    assert repr(g) == f"Format({text!r})"


def test_setters_and_clone_are_independent():
    f = Format("w=uint4b8 a=f16 n=256 k=512")
    g = f.clone()
    h = copy.copy(f)
    g.set_shape(128, 256)
    g.weight = "int8"
    g.set_scale("channel")
    g.bias = True
    g.zero_point = None
    assert g.shape == (128, 256, 1) and g.weight == DType.INT8 and g.bias
    assert g.scale.kind == raw.HM_SCALE_CHANNEL
    assert f.shape == (256, 512, 1) and f.weight == DType.UINT4B8 and not f.bias
    assert h == f


def test_activation_groups_round_trip():
    f = Format("w=e4m3 a=e4m3 c=bf16 s=f32:b128x128 n=256 k=512")
    assert f.activation_groups == 0
    f.activation_groups = 128
    assert f.activation_groups == 128
    assert "a=e4m3:g128" in str(f)
    assert Format(str(f)) == f and Format(str(f)).activation_groups == 128
    f.validate("sm_90a")
    with pytest.raises(humming.InvalidArgumentError, match="'group_k' is -1"):
        f.activation_groups = -1
    assert f.activation_groups == 128  # unchanged by the refused value
    f.activation_groups = 0
    assert "a=e4m3 " in str(f) and f.activation_groups == 0
    with pytest.raises(humming.UnsupportedError, match="R22"):
        Format("w=uint4b8 a=f16:g128 c=f16 s=f16:g128 n=256 k=512").validate()


def test_invalid_setter_values_raise():
    f = Format()
    with pytest.raises(humming.InvalidArgumentError):
        f.set_dtype(99, DType.F16)  # no such role
    with pytest.raises(humming.InvalidArgumentError):
        f.set_shape(-1, 128)


def test_validate_names_the_rule():
    ok = Format("w=uint4b8 a=f16 n=256 k=256")
    ok.validate()
    ok.validate("sm_90a")
    bad = Format("w=e2m1 a=e2m1 c=f16 s=ue8m0:g32 n=256 k=256")
    with pytest.raises(humming.UnsupportedError) as info:
        bad.validate("sm_80")
    assert info.value.status in (raw.HM_ERROR_UNSUPPORTED_ARCH, raw.HM_ERROR_UNSUPPORTED_FORMAT)
    assert info.value.message


def test_kernels_name_the_families_or_what_is_missing():
    ok = Format("w=uint4b8 a=f16 n=256 k=256")
    assert ok.kernels("sm_90a") == ["dense_wgmma", "dense_mma"]
    assert ok.kernels("sm_80") == ["dense_mma"]
    assert ok.kernels() == ["dense_wgmma", "dense_mma"]
    fp8_channel = Format("w=e4m3 a=e4m3 c=bf16 s=f32:channel n=256 k=256")
    assert fp8_channel.kernels("sm_90a") == ["dense_wgmma", "dense_mma"]
    assert fp8_channel.kernels("sm_89") == ["dense_mma"]
    fp8 = Format("w=uint4b8 a=e4m3 c=f16 s=f16:g96 n=256 k=256")
    fp8.validate("sm_90a")  # well formed...
    with pytest.raises(humming.UnsupportedError) as info:  # ...but no kernel yet
        fp8.kernels("sm_90a")
    assert info.value.status == raw.HM_ERROR_UNSUPPORTED
    assert "e4m3 activations" in info.value.message


def test_closed_format_raises_invalid_state():
    with Format() as f:
        pass
    assert f.closed
    with pytest.raises(humming.InvalidArgumentError) as info:
        f.shape
    assert info.value.status == raw.HM_ERROR_INVALID_STATE
    f.close()  # idempotent


def test_support_matrix_is_text():
    text = humming.support_matrix()
    assert "support matrix" in text.lower() and len(text) > 256  # longer than the first read


def test_sizes():
    f = Format("w=uint4b8 a=f16 s=f16:g128 n=256 k=512")
    c = f.canonical_sizes()
    assert c.codes == 256 * 512 and c.scales == 256 * 4 and c.zero_points == 0
    p = f.packed_sizes()
    assert p.weight == 256 * 512 // 2 and p.n_padded >= 256 and p.k_padded >= 512
