"""Host arrays: anything with the buffer protocol (numpy arrays, bytearray, memoryview, array)
is viewed as a numpy array without a copy, then checked for dtype, size, contiguity and
writability before its address goes to C. Nothing is converted silently: a float64 array where
float32 is needed is an error, not a hidden copy."""
import numpy as np

from ._dtype import DType
from ._errors import argument_error

# numpy dtype name -> Humming dtype, for the dtypes the C functions read or write on the host.
_NUMPY_TO_HM = {
    "float32": DType.F32,
    "float16": DType.F16,
    "bfloat16": DType.BF16,  # ml_dtypes.bfloat16
}


def as_array(obj, name):
    """A zero-copy numpy view of a buffer-protocol object."""
    if isinstance(obj, np.ndarray):
        return obj
    try:
        view = memoryview(obj)
    except TypeError:
        raise argument_error(
            f"argument '{name}' is a {type(obj).__name__}, which has no buffer protocol; "
            "pass a numpy array (or any object with the buffer protocol)") from None
    return np.asarray(view)


def host_array(obj, name, dtype, count=None, shapes=None, writable=False):
    """Checks a host buffer and returns (array, address).

    dtype: a numpy dtype (or a tuple of allowed ones); count: the element count the C function
    will touch; shapes: allowed shapes (tuples), checked instead of count when given."""
    arr = as_array(obj, name)
    allowed = dtype if isinstance(dtype, tuple) else (dtype,)
    allowed = tuple(np.dtype(d) for d in allowed)
    if arr.dtype not in allowed:
        names = " or ".join(d.name for d in allowed)
        raise argument_error(f"argument '{name}' has dtype {arr.dtype.name}, expected {names} "
                             f"(convert it first, e.g. with .astype('{allowed[0].name}'))")
    if not arr.flags.c_contiguous:
        raise argument_error(f"argument '{name}' is not C-contiguous (row-major); "
                             "pass numpy.ascontiguousarray(...) of it")
    if writable and not arr.flags.writeable:
        raise argument_error(f"argument '{name}' is read-only, but the library writes into it")
    if shapes is not None:
        shapes = [tuple(int(d) for d in s) for s in shapes]
        if tuple(arr.shape) not in shapes:
            expected = " or ".join(str(s) for s in shapes)
            raise argument_error(f"argument '{name}' has shape {tuple(arr.shape)}, expected {expected}")
    elif count is not None and arr.size != count:
        raise argument_error(f"argument '{name}' has {arr.size} elements, expected {count}")
    return arr, address(arr)


def address(arr):
    """The address of a numpy array's first element (0 for an empty array)."""
    return arr.__array_interface__["data"][0] if arr.size else 0


def weight_dtype(arr, name):
    """The Humming dtype of a float host array (F32, F16 or BF16)."""
    hm = _NUMPY_TO_HM.get(arr.dtype.name)
    if hm is None:
        raise argument_error(f"argument '{name}' has dtype {arr.dtype.name}, expected float32, "
                             "float16 or bfloat16")
    return hm


def empty(dtype, shape):
    return np.empty(shape, dtype=dtype)
