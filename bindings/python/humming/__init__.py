"""Humming: JIT-compiled GEMM kernels for quantized inference (Python bindings).

The C API (include/humming.h) is wrapped whole by SWIG in humming.raw; this package is the
Pythonic layer on top: Format, Context, Plan, Kernel, LaunchParams, host quantization and
packing with numpy arrays, device tensors from torch / DLPack / __cuda_array_interface__, and
statuses raised as humming.Error (with the status name and the library's message).
humming.torch has a drop-in for torch.nn.Linear.
"""
from . import raw
from ._convert import (STACK_EXPERTS, STACK_ROWS, ConvertedLayer, convert_file, convert_layer,
                       convert_model, scheme_parse, stack_layers)
from ._device import DeviceArray, DeviceTensor, device_tensor
from ._dtype import DType
from ._errors import (CacheError, CompileError, DriverError, Error, InternalError,
                      InvalidArgumentError, OutOfMemoryError, UnsupportedError, check,
                      last_error_message)
from ._format import (CanonicalSizes, CanonicalWeight, Format, PackedSizes, PackedWeight, Scale,
                      support_matrix)
from ._plan import NONDETERMINISTIC, DevicePackedWeight, Plan
from ._pack_device import pack_device
from ._moe import MoeAlignResult, MoeAlignSizes, moe_align, moe_align_sizes, moe_reduce
from ._quant import dequantize_activation, quantize_activation, reference_gemm
from ._quant_device import activation_scale_groups, quantize_activation_device
from ._runtime import (NO_DEVICE, Context, DeviceInfo, Kernel, LaunchParams, RuntimeInfo,
                       cache_prune, runtime_info)
from ._stored import StoredLayer, StoredModel, converted_layers, read_converted

__version__ = raw.hm_version_string()


def version():
    """The version of the loaded library as (major, minor, patch)."""
    v = raw.hm_version()
    return v // 10000, v // 100 % 100, v % 100


def abi_version():
    return raw.hm_abi_version()


def status_name(status):
    """"ERROR_PARSE" for HM_ERROR_PARSE, "UNKNOWN" for codes the library does not know."""
    return raw.hm_status_name(int(status))


def clear_last_error():
    raw.hm_clear_last_error()


# Header constants without their HM_ prefix: humming.ARG_A, humming.SCALE_GROUP, ...
for _name in dir(raw):
    if _name.startswith("HM_"):
        globals().setdefault(_name[3:], getattr(raw, _name))
del _name
