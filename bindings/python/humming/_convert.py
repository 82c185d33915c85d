"""Checkpoint conversion: one layer's tensors as the producing tool wrote them -> a Format plus
canonical buffers (then Format.pack), or a whole safetensors file -> the standard layout."""
import ctypes

import numpy as np

from . import raw
from ._dtype import as_dtype
from ._errors import argument_error, check
from ._format import CanonicalWeight, Format
from ._handle import Handle
from ._host import as_array, host_array

# numpy dtype name -> safetensors dtype string.
_SAFETENSORS = {"int8": "I8", "uint8": "U8", "int16": "I16", "uint16": "U16", "int32": "I32",
                "uint32": "U32", "int64": "I64", "uint64": "U64", "float16": "F16",
                "float32": "F32", "float64": "F64", "bfloat16": "BF16", "bool": "BOOL",
                "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2"}
_CONVENTIONS = {"default": raw.HM_GLOBAL_SCALE_DEFAULT, "multiply": raw.HM_GLOBAL_SCALE_MULTIPLY,
                "divide": raw.HM_GLOBAL_SCALE_DIVIDE}

_PROGRESS = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint64,
                             ctypes.c_uint64)
_CANCEL = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)
_MODEL_PROGRESS = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32,
                                   ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint64,
                                   ctypes.c_uint64)
_EVENTS = {raw.HM_CONVERT_EVENT_LAYER: "layer", raw.HM_CONVERT_EVENT_TENSOR: "tensor",
           raw.HM_CONVERT_EVENT_FILE: "file"}
_WRITERS = {None: 0, "autogptq": raw.HM_CONVERT_GPTQ_V1_AUTOGPTQ,
            "gptqmodel": raw.HM_CONVERT_GPTQ_V1_GPTQMODEL}
_PACKINGS = {None: 0, "dense": raw.HM_CONVERT_CT_PACK_DENSE,
             "aligned": raw.HM_CONVERT_CT_PACK_WORD_ALIGNED}


def scheme_parse(name):
    """The HM_SCHEME_* constant of a scheme name ("gptq", "awq", "ct-fp8", ...)."""
    status, scheme = raw.hm_scheme_parse(str(name))
    check(status)
    return scheme


def _scheme(scheme):
    return scheme_parse(scheme) if isinstance(scheme, str) else int(scheme)


def _options(activation=None, output=None, bits=0, group_size=0, gptq_v2=False,
             split_gate_up=False, keep_k_order=False, global_scale="default", shard_rows=None,
             asymmetric=False, gptq_writer=None, ct_packing=None):
    """A filled hm_convert_options_t and what must stay alive while it is used."""
    options = raw.hm_convert_options_t()
    raw.hm_convert_options_init(options)
    keep = []
    if activation is not None:
        options.activation = int(as_dtype(activation))
    if output is not None:
        options.output = int(as_dtype(output))
    options.bits = int(bits)
    options.group_size = int(group_size)
    options.flags = ((raw.HM_CONVERT_GPTQ_V2 if gptq_v2 else 0)
                     | (raw.HM_CONVERT_SPLIT_GATE_UP if split_gate_up else 0)
                     | (raw.HM_CONVERT_KEEP_K_ORDER if keep_k_order else 0)
                     | (raw.HM_CONVERT_ASYMMETRIC if asymmetric else 0))
    for value, table, name in ((gptq_writer, _WRITERS, "gptq_writer"),
                               (ct_packing, _PACKINGS, "ct_packing")):
        if value not in table:
            raise argument_error(f"argument '{name}' is {value!r}; expected one of "
                                 f"{', '.join(str(k) for k in table)}")
        options.flags |= table[value]
    if global_scale not in _CONVENTIONS:
        raise argument_error(f"argument 'global_scale' is {global_scale!r}; expected one of "
                             f"{', '.join(_CONVENTIONS)}")
    options.global_scale_convention = _CONVENTIONS[global_scale]
    if shard_rows is not None:
        rows, address = host_array(np.ascontiguousarray(shard_rows, dtype=np.int64),
                                   "shard_rows", np.int64)
        keep.append(rows)
        options.shard_rows = address
        options.shard_count = rows.size
    return options, keep


def _tensor(name, value):
    """A hm_checkpoint_tensor_t over a host array; value may be (array, "F8_E4M3") to name a
    safetensors dtype numpy cannot express."""
    dtype = None
    if isinstance(value, tuple):
        value, dtype = value
    arr = as_array(value, name)
    if dtype is None:
        dtype = _SAFETENSORS.get(arr.dtype.name)
        if dtype is None:
            raise argument_error(f"tensor '{name}' has dtype {arr.dtype.name}, which has no "
                                 "safetensors name; pass (array, 'F8_E4M3')-style tuples")
    if arr.ndim > 8:
        raise argument_error(f"tensor '{name}' has {arr.ndim} dimensions; at most 8")
    arr, address = host_array(arr, name, arr.dtype)
    t = raw.hm_checkpoint_tensor_t()
    raw.hm_checkpoint_tensor_init(t)
    t.name = str(name)
    t.dtype = str(dtype)
    t.shape = tuple(int(d) for d in arr.shape)
    t.ndim = arr.ndim
    t.data = address
    t.bytes = arr.nbytes
    return t, arr


def _copy(address, ctype, count, dtype):
    if not address or not count:
        return None
    buffer = (ctype * count).from_address(address)
    return np.frombuffer(buffer, dtype=dtype, count=count).copy()


class ConvertedLayer(Handle):
    """One converted layer: `format`, `canonical` (CanonicalWeight, host copies), `bias`
    (float32 [E*N] or None), `k_permutation` (int32 [K] or None: gather the activations with
    it, A'[:, k] = A[:, k_permutation[k]]) and `note` (str: what the conversion lost, e.g. MXFP4
    scale groups below the exponent window of 8-bit activations; None when nothing)."""

    _destroy = staticmethod(raw.hm_converted_layer_destroy)

    def __init__(self, handle):
        super().__init__(handle)
        status, fmt = raw.hm_converted_layer_format(self.handle)
        check(status)
        self.format = Format._adopt(fmt)
        info = raw.hm_converted_layer_info_t()
        raw.hm_converted_layer_info_init(info)
        check(raw.hm_converted_layer_info(self.handle, info))
        sizes = self.format.canonical_sizes()
        n, k, e = self.format.shape
        w = info.weight
        self.canonical = CanonicalWeight(
            codes=_copy(w.codes, ctypes.c_uint8, sizes.codes, np.uint8),
            scales=_copy(w.scales, ctypes.c_float, sizes.scales, np.float32),
            zero_points=_copy(w.zero_points, ctypes.c_float, sizes.zero_points, np.float32),
            global_scale=_copy(w.global_scale, ctypes.c_float, sizes.global_scale, np.float32))
        self.bias = _copy(info.bias, ctypes.c_float, e * n, np.float32)
        self.k_permutation = _copy(info.k_permutation, ctypes.c_int32, k, np.int32)
        self.note = info.note or None

    def pack(self):
        return self.format.pack(self.canonical)


def convert_layer(scheme, tensors, **options):
    """Converts one layer. scheme: a name or HM_SCHEME_*; tensors: {name: host array}, names as
    in the checkpoint ("qweight", "scales", ... or full names). Options: activation, output,
    bits, group_size, gptq_v2, split_gate_up, keep_k_order, global_scale ("default",
    "multiply", "divide"), shard_rows."""
    opts, keep = _options(**options)
    items = tensors.items() if isinstance(tensors, dict) else tensors
    structs = []
    for name, value in items:
        struct, arr = _tensor(name, value)
        structs.append(struct)
        keep.append(arr)
    status, handle = raw.hm_convert_layer(_scheme(scheme), structs, opts)
    check(status)
    return ConvertedLayer(handle)


STACK_EXPERTS = raw.HM_STACK_EXPERTS
STACK_ROWS = raw.HM_STACK_ROWS


def stack_layers(layers, axis="experts"):
    """Joins converted layers into a new one (docs/convert.md "Stacking experts"): axis
    "experts" (HM_STACK_EXPERTS) puts the layers' experts in order into one MoE layer (E = the
    sum of theirs: experts converted one by one); "rows" (HM_STACK_ROWS) puts, expert by
    expert, the layers' rows in order (N = the sum: gate and up into one gate_up layer, as
    humming.torch.MoE takes it). The layers must share one format but for E (or N) and one K
    permutation; nothing is re-quantized, and the inputs are left as they are."""
    axes = {"experts": STACK_EXPERTS, "rows": STACK_ROWS}
    if axis not in axes and axis not in axes.values():
        raise argument_error(f"axis must be 'experts' or 'rows', got {axis!r}")
    layers = list(layers)
    for i, layer in enumerate(layers):
        if not isinstance(layer, ConvertedLayer):
            raise argument_error(f"layers[{i}] is a {type(layer).__name__}, not a ConvertedLayer")
    status, handle = raw.hm_converted_layer_stack([layer.handle for layer in layers],
                                                  axes.get(axis, axis))
    check(status)
    return ConvertedLayer(handle)


def convert_file(scheme, in_path, out_path, progress=None, **options):
    """Converts a safetensors file into the standard layout (docs/convert.md). progress, if
    given, is called as progress(tensor_name, done_bytes, total_bytes). An exception it raises,
    or a KeyboardInterrupt that arrives during the conversion, stops it after the current layer
    (nothing is written to out_path) and is re-raised."""
    opts, keep = _options(**options)
    raised = []

    # Asked by the library after each tensor and layer: the Python code that runs here is where a
    # pending Ctrl-C is delivered, so it too cancels.
    def cancel(_user):
        try:
            return 1 if raised else 0
        except BaseException as e:  # noqa: B902 — carried back to the caller
            raised.append(e)
            return 1
    cancel_callback = _CANCEL(cancel)
    keep.append(cancel_callback)
    opts.cancel = ctypes.cast(cancel_callback, ctypes.c_void_p).value
    if progress is not None:
        def trampoline(_user, name, done, total):
            if raised:
                return
            try:
                progress(name.decode("utf-8", "replace") if name else "", done, total)
            except BaseException as e:  # noqa: B902 — carried back to the caller
                raised.append(e)
        callback = _PROGRESS(trampoline)
        keep.append(callback)
        opts.progress = ctypes.cast(callback, ctypes.c_void_p).value
    status = raw.hm_convert_file(str(scheme), str(in_path), str(out_path), opts)
    if raised:  # the cancellation's cause, not the library's "cancelled" status
        raise raised[0]
    if status != raw.HM_SUCCESS:
        check(status)


def convert_model(in_dir, out_dir, scheme=None, force=False, dry_run=False, threads=0,
                  progress=None, stack_experts=False, join_gate_up=False, **options):
    """Converts a Hugging Face model folder (docs/convert.md): the scheme and parameters come
    from its quantization config; options (as for convert_layer, plus asymmetric, gptq_writer
    "autogptq"/"gptqmodel", ct_packing "dense"/"aligned") override it. stack_experts writes
    experts stored one layer each (<base>.experts.<i>.<proj>) as one layer of E experts
    (<base>.experts.<proj>); join_gate_up (with it) joins gate and up into
    <base>.experts.gate_up_proj, as humming.torch.MoE takes them. progress, if given, is
    called as progress(kind, name, detail, done_bytes, total_bytes) with kind "layer", "tensor"
    or "file"; returning True cancels, and an exception it raises cancels and is re-raised.
    Returns the summary as a dict (layers, tensors, files, shards, bytes_in, bytes_out,
    seconds)."""
    layer_opts, keep = _options(**options)
    opts = raw.hm_convert_model_options_t()
    raw.hm_convert_model_options_init(opts)
    if scheme is not None:
        opts.scheme = str(scheme)
    opts.layer_options = layer_opts
    opts.flags = ((raw.HM_CONVERT_MODEL_FORCE if force else 0)
                  | (raw.HM_CONVERT_MODEL_DRY_RUN if dry_run else 0)
                  | (raw.HM_CONVERT_MODEL_STACK_EXPERTS if stack_experts else 0)
                  | (raw.HM_CONVERT_MODEL_JOIN_GATE_UP if join_gate_up else 0))
    opts.threads = int(threads)
    raised = []
    if progress is not None:
        def trampoline(_user, kind, name, detail, done, total):
            try:
                stop = progress(_EVENTS.get(kind, str(kind)),
                                name.decode("utf-8", "replace") if name else "",
                                detail.decode("utf-8", "replace") if detail else None,
                                done, total)
                return 1 if stop else 0
            except BaseException as e:  # noqa: B902 — carried back to the caller
                raised.append(e)
                return 1
        callback = _MODEL_PROGRESS(trampoline)
        keep.append(callback)
        opts.progress = ctypes.cast(callback, ctypes.c_void_p).value
    summary = raw.hm_convert_model_summary_t()
    raw.hm_convert_model_summary_init(summary)
    status = raw.hm_convert_model(str(in_dir), str(out_dir), opts, summary)
    if raised:
        raise raised[0]
    check(status)
    return {"layers": summary.layers, "tensors": summary.tensors, "files": summary.files,
            "shards": summary.shards, "bytes_in": summary.bytes_in,
            "bytes_out": summary.bytes_out, "seconds": summary.seconds}
