"""Our dtype decode / encode (through the C ABI, loaded with ctypes) against the ml_dtypes package.

Decode: every code. Encode: a dense sweep of values inside the finite range (both libraries round
to nearest even there; outside it we saturate while ml_dtypes may give Inf or NaN, see
docs/dtypes.md). ue8m0 ties are excluded: we round them to the even code, ml_dtypes rounds them up.

HUMMING_LIBRARY names libhumming.so (CTest sets it). A missing ml_dtypes fails the import: this
test must never skip.
"""
import ctypes
import os

import ml_dtypes
import numpy as np
import pytest

HM_SUCCESS = 0


def _load():
    path = os.environ.get("HUMMING_LIBRARY")
    assert path, "set HUMMING_LIBRARY to the path of libhumming.so"
    lib = ctypes.CDLL(path)
    lib.hm_dtype_parse.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint32)]
    lib.hm_dtype_parse.restype = ctypes.c_int32
    lib.hm_dtype_name.argtypes = [ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t,
                                  ctypes.POINTER(ctypes.c_size_t)]
    lib.hm_dtype_name.restype = ctypes.c_int32
    lib.hm_dtype_decode.argtypes = [ctypes.c_uint32, ctypes.c_uint32, ctypes.POINTER(ctypes.c_double)]
    lib.hm_dtype_decode.restype = ctypes.c_int32
    lib.hm_dtype_encode.argtypes = [ctypes.c_uint32, ctypes.c_double, ctypes.POINTER(ctypes.c_uint32)]
    lib.hm_dtype_encode.restype = ctypes.c_int32
    lib.hm_last_error_message.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.hm_last_error_message.restype = ctypes.c_size_t
    return lib


LIB = _load()


def last_error():
    buf = ctypes.create_string_buffer(4096)
    LIB.hm_last_error_message(buf, len(buf))
    return buf.value.decode()


def parse(name):
    out = ctypes.c_uint32()
    status = LIB.hm_dtype_parse(name.encode(), ctypes.byref(out))
    assert status == HM_SUCCESS, last_error()
    return out.value


def name_of(dtype):
    buf = ctypes.create_string_buffer(64)
    length = ctypes.c_size_t()
    assert LIB.hm_dtype_name(dtype, buf, len(buf), ctypes.byref(length)) == HM_SUCCESS, last_error()
    return buf.value.decode()


def decode(dtype, code):
    out = ctypes.c_double()
    assert LIB.hm_dtype_decode(dtype, code, ctypes.byref(out)) == HM_SUCCESS, last_error()
    return out.value


def encode(dtype, value):
    out = ctypes.c_uint32()
    assert LIB.hm_dtype_encode(dtype, float(value), ctypes.byref(out)) == HM_SUCCESS, last_error()
    return out.value


# (ml_dtypes type, the name we parse, our canonical name, bits)
FLOATS = [
    ("float8_e4m3fn", "float8_e4m3fn", "e4m3", 8),
    ("float8_e5m2", "float8_e5m2", "e5m2", 8),
    ("float8_e4m3", "float8_e4m3", "e4m3ieee", 8),
    ("float8_e3m4", "float8_e3m4", "e3m4ieee", 8),
    ("float6_e2m3fn", "float6_e2m3fn", "e2m3", 6),
    ("float6_e3m2fn", "float6_e3m2fn", "e3m2", 6),
    ("float4_e2m1fn", "float4_e2m1fn", "e2m1", 4),
    ("float8_e8m0fnu", "float8_e8m0fnu", "ue8m0", 8),
]
INTS = [("int1", 1), ("int2", 2), ("int4", 4), ("uint1", 1), ("uint2", 2), ("uint4", 4)]


def ml_type(name):
    t = getattr(ml_dtypes, name, None)
    if t is None:
        # Only these are new enough to be absent from older ml_dtypes releases.
        assert name in ("float8_e3m4", "float8_e4m3", "int1", "uint1"), f"ml_dtypes lacks {name}"
        pytest.skip(f"this ml_dtypes has no {name}")
    return t


def ml_values(t, bits):
    codes = np.arange(1 << bits, dtype=np.uint8)
    return codes.view(t).astype(np.float64)


@pytest.mark.parametrize("ml_name,parse_name,canonical,bits", FLOATS)
def test_float_decode_every_code(ml_name, parse_name, canonical, bits):
    t = ml_type(ml_name)
    dtype = parse(parse_name)
    assert name_of(dtype) == canonical
    assert parse(canonical) == dtype
    expected = ml_values(t, bits)
    for code in range(1 << bits):
        ours = decode(dtype, code)
        if np.isnan(expected[code]):
            assert np.isnan(ours), (canonical, code)
        else:
            assert ours == expected[code], (canonical, code, ours, expected[code])
            assert np.signbit(ours) == np.signbit(expected[code]), (canonical, code)


@pytest.mark.parametrize("ml_name,parse_name,canonical,bits", FLOATS)
def test_float_encode_dense_sweep(ml_name, parse_name, canonical, bits):
    t = ml_type(ml_name)
    dtype = parse(parse_name)
    finite = ml_values(t, bits)
    finite = np.unique(finite[np.isfinite(finite)])
    top = finite.max()
    # Every value, every midpoint and its neighbours, and random values, all within range.
    mids = (finite[:-1] + finite[1:]) / 2
    rng = np.random.default_rng(2024)
    lo = 0.0 if canonical == "ue8m0" else -top
    sweep = np.concatenate([
        finite, mids, np.nextafter(mids, -np.inf), np.nextafter(mids, np.inf),
        rng.uniform(lo, top, 3000),
        np.exp2(rng.uniform(np.log2(finite[finite > 0].min()) - 2, np.log2(top), 3000)),
    ])
    if canonical != "ue8m0":
        sweep = np.concatenate([sweep, -sweep])
    sweep = sweep[np.abs(sweep) <= top]
    if canonical == "ue8m0":
        sweep = sweep[sweep > 0]
        # Exclude exact ties 1.5 * 2^e (documented difference).
        mantissa, _ = np.frexp(sweep)
        sweep = sweep[mantissa != 0.75]
    expected = sweep.astype(t).view(np.uint8)
    mismatches = [(x, encode(dtype, x), int(e)) for x, e in zip(sweep, expected)
                  if encode(dtype, x) != int(e)]
    assert not mismatches, f"{canonical}: {len(mismatches)} mismatches, first {mismatches[:5]}"


def test_ue8m0_ties_go_to_the_even_code():
    dtype = parse("ue8m0")
    assert encode(dtype, 1.5) == 128   # between codes 127 (1) and 128 (2)
    assert encode(dtype, 3.0) == 128   # between codes 128 (2) and 129 (4); ml_dtypes gives 129
    assert int(np.array([3.0]).astype(ml_dtypes.float8_e8m0fnu).view(np.uint8)[0]) == 129


def test_saturation_where_ml_dtypes_overflows():
    e4m3 = parse("e4m3")
    assert encode(e4m3, 1000.0) == 0x7E  # ml_dtypes float8_e4m3fn gives NaN (0x7F)
    assert int(np.array([1000.0]).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)[0]) == 0x7F
    e5m2 = parse("e5m2")
    assert encode(e5m2, 1e6) == 0x7B     # ml_dtypes gives Inf (0x7C)
    assert encode(e5m2, float("inf")) == 0x7C


@pytest.mark.parametrize("ml_name,bits", INTS)
def test_integers(ml_name, bits):
    t = ml_type(ml_name)
    dtype = parse(ml_name)
    assert name_of(dtype) == ml_name
    values = ml_values(t, bits)
    for code in range(1 << bits):
        assert decode(dtype, code) == values[code], (ml_name, code)
    info = ml_dtypes.iinfo(t)
    for v in range(int(info.min), int(info.max) + 1):
        expected = int(np.array([v], dtype=np.int64).astype(t).view(np.uint8)[0]) & ((1 << bits) - 1)
        assert encode(dtype, v) == expected, (ml_name, v)


def test_bfloat16_sample():
    dtype = parse("bfloat16")
    assert name_of(dtype) == "bf16"
    rng = np.random.default_rng(7)
    codes = np.concatenate([np.arange(0, 65536, 97), rng.integers(0, 65536, 2000)]).astype(np.uint16)
    with np.errstate(invalid="ignore"):  # NaN codes
        values = codes.view(ml_dtypes.bfloat16).astype(np.float64)
    for code, v in zip(codes, values):
        ours = decode(dtype, int(code))
        assert (np.isnan(v) and np.isnan(ours)) or ours == v, (int(code), ours, v)
    # Encode f32 values inside bf16's finite range.
    bits = rng.integers(0, 1 << 32, 4000, dtype=np.uint64).astype(np.uint32)
    xs = bits.view(np.float32)
    xs = xs[np.isfinite(xs) & (np.abs(xs) <= float(ml_dtypes.finfo(ml_dtypes.bfloat16).max))]
    expected = xs.astype(ml_dtypes.bfloat16).view(np.uint16)
    for x, e in zip(xs, expected):
        assert encode(dtype, float(x)) == int(e), (float(x), encode(dtype, float(x)), int(e))


def test_float16_matches_numpy():
    dtype = parse("fp16")
    codes = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    values = codes.view(np.float16).astype(np.float64)
    for code in range(0, 65536, 7):
        ours = decode(dtype, code)
        assert (np.isnan(values[code]) and np.isnan(ours)) or ours == values[code], code


def test_parse_rejects_unknown_names():
    out = ctypes.c_uint32(123)
    for bad in ["float8_e4m3fnuz", "int9", "e4m4", "banana", ""]:
        status = LIB.hm_dtype_parse(bad.encode(), ctypes.byref(out))
        assert status == 1003, bad  # HM_ERROR_PARSE
        assert out.value == 0
        assert f"'{bad}'" in last_error()
