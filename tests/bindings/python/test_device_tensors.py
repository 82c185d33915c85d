"""Device tensors from other libraries: DLPack capsules and __cuda_array_interface__ are parsed
into pointer, dtype, shape and strides, then checked with errors that name the argument. numpy's
CPU DLPack export exercises the capsule parsing (and the device check, which refuses it)."""
import numpy as np
import pytest

import humming
from humming._device import check_device_tensor, device_tensor


class FakeCudaArray:
    """What CuPy or Numba expose: a device pointer with shape, typestr and strides."""

    def __init__(self, ptr, shape, typestr, strides=None, readonly=False):
        self.__cuda_array_interface__ = {"data": (ptr, readonly), "shape": shape,
                                         "typestr": typestr, "strides": strides, "version": 3}


def test_cuda_array_interface_is_read():
    t = device_tensor(FakeCudaArray(0x10000, (4, 8), "<f2"), "a")
    assert (t.ptr, t.shape, t.dtype, t.device, t.itemsize) == (0x10000, (4, 8), "float16", "cuda", 2)
    assert t.contiguous and t.nbytes == 64
    checked = check_device_tensor(FakeCudaArray(0x10000, (4, 8), "<f2"), "a", 0,
                                  humming.DType.F16, shape=(4, 8))
    assert checked.ptr == 0x10000


def test_checks_reject_with_clear_messages():
    with pytest.raises(humming.InvalidArgumentError, match="'a' has dtype float32, expected float16"):
        check_device_tensor(FakeCudaArray(0x10000, (4, 8), "<f4"), "a", 0, humming.DType.F16)
    with pytest.raises(humming.InvalidArgumentError, match=r"'a' has shape \(4, 8\), expected \(8, 4\)"):
        check_device_tensor(FakeCudaArray(0x10000, (4, 8), "<f2"), "a", 0, humming.DType.F16,
                            shape=(8, 4))
    transposed = FakeCudaArray(0x10000, (8, 4), "<f2", strides=(2, 16))
    with pytest.raises(humming.InvalidArgumentError, match="'a' is not contiguous"):
        check_device_tensor(transposed, "a", 0, humming.DType.F16)
    with pytest.raises(humming.InvalidArgumentError, match="read-only"):
        check_device_tensor(FakeCudaArray(0x10000, (4,), "<f2", readonly=True), "c", 0,
                            humming.DType.F16, writable=True)
    with pytest.raises(humming.InvalidArgumentError, match="needs at least 100"):
        check_device_tensor(FakeCudaArray(0x10000, (4,), "|u1"), "weight", 0, min_bytes=100)
    with pytest.raises(humming.InvalidArgumentError, match="expected a device tensor"):
        check_device_tensor(object(), "a", 0)
    # Sub-byte dtypes travel as bytes.
    check_device_tensor(FakeCudaArray(0x10000, (4, 4), "|u1"), "a", 0, humming.DType.E2M1)
    # fp8 codes too (quantize_activation_device writes uint8), but nothing wider.
    for fp8 in (humming.DType.E4M3, humming.DType.E5M2):
        check_device_tensor(FakeCudaArray(0x10000, (4, 4), "|u1"), "a", 0, fp8)
    with pytest.raises(humming.InvalidArgumentError,
                       match="'a' has dtype float16, expected float8_e4m3fn or uint8"):
        check_device_tensor(FakeCudaArray(0x10000, (4, 4), "<f2"), "a", 0, humming.DType.E4M3)


def test_dlpack_capsule_is_parsed_and_cpu_memory_refused():
    if not hasattr(np.ndarray, "__dlpack__"):
        pytest.skip("this numpy has no DLPack export")
    base = np.arange(24, dtype=np.float16).reshape(4, 6)
    view = base[:, 1:5]  # strided: the capsule carries strides and the data offset
    t = device_tensor(view, "a")
    assert t.device == "cpu" and t.dtype == "float16" and t.shape == (4, 4)
    assert t.strides == (6, 1) and not t.contiguous
    assert t.ptr == base.__array_interface__["data"][0] + 2
    with pytest.raises(humming.InvalidArgumentError) as info:
        check_device_tensor(base, "a", 0, humming.DType.F16)
    assert info.value.status == humming.ERROR_WRONG_DEVICE
    assert "'a' is in cpu memory" in info.value.message and "(4, 6)" in info.value.message
