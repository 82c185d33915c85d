"""humming.torch: a drop-in for torch.nn.Linear that runs a Humming plan.

    layer = humming.torch.Linear.from_linear(nn.Linear(4096, 4096).half().cuda(),
                                             "w=uint4b8 a=f16 c=f16 s=f16:g128")
    y = layer(x)  # x: [..., 4096] float16 on the same device

The weight is quantized and packed once (on the host, through the library's reference path) and
kept on the device in the standard layout; forward() runs hm_plan_gemm on the current torch
stream with no host synchronization and no allocation besides the output tensor (and, for
8-bit activations, the codes and scales it quantizes the input into; torch takes them all from
the graph pool under capture), so it works under CUDA graph capture.
Importing humming does not import torch; importing humming.torch does.
"""
import os
import threading

import numpy as np
import torch

from . import _convert
from ._format import Format
from ._plan import DevicePackedWeight, Plan
from ._runtime import Context
from ._errors import argument_error
from ._stored import StoredModel, read_converted

_HM_TO_TORCH = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}

# One Context per device per process: contexts own the driver state and the kernel cache handle.
_contexts = {}
_contexts_lock = threading.Lock()


def context_for(device):
    """The shared humming.Context of a torch CUDA device."""
    device = torch.device(device)
    if device.type != "cuda":
        raise argument_error(f"humming.torch needs a CUDA device, got {device}")
    index = device.index if device.index is not None else torch.cuda.current_device()
    with _contexts_lock:
        ctx = _contexts.get(index)
        if ctx is None or ctx.closed:
            ctx = _contexts[index] = Context(index)
        return ctx


def _numpy_view(t):
    """A host numpy array with the bytes of a torch tensor (bf16/fp8 as their own ml_dtypes
    type when ml_dtypes is installed, else through an integer view)."""
    t = t.detach().contiguous().cpu()
    try:
        return t.numpy()
    except TypeError:  # bfloat16, float8: numpy has no such dtype
        return t.view(torch.uint8 if t.element_size() == 1 else torch.int16).numpy()


def _safetensors_dtype(t):
    return {torch.bfloat16: "BF16", torch.float8_e4m3fn: "F8_E4M3",
            torch.float8_e5m2: "F8_E5M2"}.get(t.dtype)


def _activation_codes(fmt):
    """(codes, group_k) of a format's activations: codes "e4m3" / "e5m2" / "int8" when its GEMM
    reads 8-bit activations quantized on the device from the layer's 16-bit input, with group_k
    the format's activation groups (0: one scale per token); (None, 0) for 16-bit ones."""
    act = fmt.activation.name
    if act not in ("e4m3", "e5m2", "int8"):
        return None, 0
    return act, fmt.activation_groups


def _quantized_input(a, codes, group_k):
    """A GEMM's input as its plan reads it: `a` itself (codes None), or its 8-bit codes and
    float32 scales ([rows], or [rows, ceil(K / group_k)] with activation groups), quantized on
    the current stream."""
    if codes is None:
        return a, None
    q, scales = quantize_activation(a, codes, group_k=group_k)
    return q, scales if group_k else scales.view(-1)


class _FormatDtypes:
    """The floating buffers of these layers (f32 global scales, the bias in the output dtype,
    scale codes) hold a format's exact dtypes: a whole-model cast (model.half(),
    model.to(torch.bfloat16)) keeps them as they are, where it would have made the layer refuse
    its next call (or, cast back, lose their f32 values)."""

    def _apply(self, fn, *args, **kwargs):
        before = {name: t for name, t in self._buffers.items()
                  if t is not None and t.is_floating_point()}
        out = super()._apply(fn, *args, **kwargs)
        for name, t in before.items():
            now = self._buffers.get(name)
            if now is not None and now.dtype != t.dtype:
                self._buffers[name] = t.to(device=now.device)
        return out


class Linear(_FormatDtypes, torch.nn.Module):
    """y = x @ dequant(W)^T (+ bias) for x of shape [..., in_features]."""

    def __init__(self, format, packed, *, bias=None, device=None, max_m=0, k_permutation=None,
                 context=None):
        """format: a complete humming.Format (shape set); packed: a humming.PackedWeight (host,
        from Format.pack) or DevicePackedWeight of torch tensors; bias: [N] tensor."""
        super().__init__()
        fmt = format if isinstance(format, Format) else Format(format)
        device = torch.device(device if device is not None else "cuda")
        self.context = context or context_for(device)
        self.device = torch.device("cuda", self.context.device)
        self.format = fmt.clone()
        n, k, experts = fmt.shape
        if experts != 1:
            raise argument_error("humming.torch.Linear is for dense layers (experts = 1)")
        self.in_features, self.out_features = k, n
        self.output_dtype = _HM_TO_TORCH.get(fmt.output.name)
        # 8-bit activations (a=e4m3, a=e5m2, a=int8): forward() takes an input of the output
        # dtype (f16 or bf16) and quantizes it per token on the device, into the codes and scales
        # the kernels read.
        act = fmt.activation.name
        # Activation groups (a=e4m3:g128): one scale per token and group of activation_group_k
        # inputs ([M, ceil(K / group_k)]); 0: one per token.
        self.activation_codes, self.activation_group_k = _activation_codes(fmt)
        if self.activation_codes is None:
            self.input_dtype = _HM_TO_TORCH.get(act)
        elif self.output_dtype in (torch.float16, torch.bfloat16):
            self.input_dtype = self.output_dtype
        else:
            self.input_dtype = None
        if self.input_dtype is None or self.output_dtype is None:
            raise argument_error(f"humming.torch.Linear runs f16/bf16/f32 activations and outputs, "
                                 f"or e4m3/e5m2/int8 activations with an f16/bf16 output (the input "
                                 f"is quantized from that dtype); the format has a={act} "
                                 f"c={fmt.output.name}")

        def up(value):
            if value is None:
                return None
            if isinstance(value, torch.Tensor):
                return value.to(self.device).contiguous()
            return torch.from_numpy(np.ascontiguousarray(value)).to(self.device)
        for name in ("weight", "scales", "zero_points", "global_scale"):
            self.register_buffer(name, up(getattr(packed, name, None)), persistent=True)
        self.register_buffer("bias", None if bias is None else
                             up(bias).to(self.output_dtype).reshape(n))
        self.register_buffer("k_permutation", None if k_permutation is None else
                             up(k_permutation).to(torch.int64))
        self.plan = Plan(self.context, fmt, max_m=max_m).prepare()
        self.max_m = max_m
        # Allocated and zeroed once, for the largest M (2^24 stands for "no limit": the size
        # query stops where M stops splitting K); the kernels leave it zeroed again.
        nbytes = self.plan.workspace_size(max_m or (1 << 24))
        self.register_buffer("workspace", torch.zeros(nbytes, dtype=torch.uint8, device=self.device)
                             if nbytes else None, persistent=False)
        # Calls that share a workspace must not run at once (humming.h); calls on one stream
        # never do, so each stream the layer runs on gets its own (the first takes `workspace`).
        self._stream_workspaces = {}

    def _workspace(self, stream):
        if self.workspace is None:
            return None
        ws = self._stream_workspaces.get(stream)
        if ws is None:
            # Zeroed on `stream` itself (the current one), before the GEMM that uses it.
            ws = torch.zeros_like(self.workspace) if self._stream_workspaces else self.workspace
            self._stream_workspaces[stream] = ws
        return ws

    # ---- construction ------------------------------------------------------------------------
    @classmethod
    def from_linear(cls, linear, format="w=uint4b8 a=f16 c=f16 s=f16:g128", *, max_m=0,
                    device=None):
        """Quantizes an nn.Linear's weight (N and K come from the layer; the bias flag too)."""
        fmt = Format(format)
        fmt.set_shape(linear.out_features, linear.in_features)
        fmt.bias = linear.bias is not None
        weight = linear.weight.detach().float().cpu().numpy()
        packed = fmt.pack(fmt.quantize(weight))
        device = device if device is not None else (
            linear.weight.device if linear.weight.is_cuda else "cuda")
        return cls(fmt, packed, bias=None if linear.bias is None else linear.bias.detach(),
                   device=device, max_m=max_m)

    @classmethod
    def from_checkpoint(cls, scheme, tensors, *, max_m=0, device=None, **options):
        """Converts one layer's checkpoint tensors ({"qweight": t, "qzeros": t, ...}, as the
        producing tool saved them) with humming.convert_layer, then packs and uploads it."""
        host = {}
        for name, t in tensors.items():
            if isinstance(t, torch.Tensor):
                dtype = _safetensors_dtype(t)
                host[name] = (_numpy_view(t), dtype) if dtype else _numpy_view(t)
            else:
                host[name] = t
        with _convert.convert_layer(scheme, host, **options) as layer:
            fmt = layer.format.clone()
            packed = layer.pack()
            bias = None if layer.bias is None else torch.from_numpy(layer.bias)
            perm = None if layer.k_permutation is None else torch.from_numpy(layer.k_permutation)
        return cls(fmt, packed, bias=bias, device=device, max_m=max_m, k_permutation=perm)

    @classmethod
    def from_converted(cls, path, prefix, *, max_m=0, device=None):
        """The layer `prefix` of a converted folder or file (humming convert, convert_model,
        convert_file), read with humming.read_converted: its format, packed weight, bias and K
        permutation, uploaded."""
        return cls._from_stored(read_converted(path, [prefix])[prefix], max_m, device)

    @classmethod
    def _from_stored(cls, stored, max_m, device):
        return cls(stored.format, stored.packed,
                   bias=None if stored.bias is None else torch.from_numpy(stored.bias),
                   device=device, max_m=max_m,
                   k_permutation=None if stored.k_permutation is None
                   else torch.from_numpy(stored.k_permutation))

    # ---- running ---------------------------------------------------------------------------
    def forward(self, x):
        if x.shape[-1] != self.in_features:
            raise argument_error(f"input has {x.shape[-1]} features, the layer takes "
                                 f"{self.in_features}")
        if x.dtype != self.input_dtype:
            raise argument_error(f"input dtype is {x.dtype}, the layer's format runs "
                                 f"{self.input_dtype}; cast it first")
        lead = x.shape[:-1]
        a = x.reshape(-1, self.in_features)
        if self.k_permutation is not None:
            a = a.index_select(1, self.k_permutation)
        a = a.contiguous()
        out = torch.empty((a.shape[0], self.out_features), dtype=self.output_dtype,
                          device=x.device)
        if a.shape[0] == 0:
            return out.reshape(*lead, self.out_features)
        stream = torch.cuda.current_stream(x.device).cuda_stream
        a, act_scales = _quantized_input(a, self.activation_codes, self.activation_group_k)
        weight = DevicePackedWeight(self.weight, self.scales, self.zero_points, self.global_scale)
        self.plan.gemm(a, weight, out, bias=self.bias, workspace=self._workspace(stream),
                       act_scales=act_scales, stream=stream)
        return out.reshape(*lead, self.out_features)

    def extra_repr(self):
        return f"{self.format}"


def replace_linears(module, path, *, prefix="", max_m=0, device=None):
    """Swaps every torch.nn.Linear inside `module` that a converted folder or file holds for a
    humming.torch.Linear of that layer, in place: the way to serve a converted Hugging Face model
    in a model built from its config. A Linear matches when `prefix` + its name in
    module.named_modules() is a converted layer of `path` (prefix ends with "." when it is a
    path, e.g. "model."). Every layer is read and built before any is swapped, so a layer whose
    shape or bias flag differs from its nn.Linear, or that cannot be built, raises with the model
    untouched. Each goes to its nn.Linear's CUDA device (or `device`). The replaced modules hold
    packed weights: code that reads a Linear's .weight as a float tensor will not work on them.
    Returns the names replaced."""
    built = []
    with StoredModel(path) as stored:
        present = set(stored.layers)
        for name, child in module.named_modules():
            if not isinstance(child, torch.nn.Linear) or prefix + name not in present:
                continue
            if not name:
                raise argument_error("the module itself is the converted Linear: build it with "
                                     "humming.torch.Linear.from_converted")
            fmt = stored.format(prefix + name)
            n, k, experts = fmt.shape
            if (experts, n, k) != (1, child.out_features, child.in_features) or \
                    fmt.bias != (child.bias is not None):
                raise argument_error(
                    f"converted layer {prefix + name} is {fmt}; the nn.Linear it would replace is "
                    f"{child.out_features} x {child.in_features}, bias={child.bias is not None}")
            where = device if device is not None else (
                child.weight.device if child.weight.is_cuda else None)
            built.append((name, Linear._from_stored(stored.read(prefix + name), max_m, where)))
    for name, layer in built:
        parent, _, leaf = name.rpartition(".")
        setattr(module.get_submodule(parent) if parent else module, leaf, layer)
    return [prefix + name for name, _ in built]


_CODE_DTYPES = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "int8": torch.int8}


def quantize_activation(x, dtype, group_k=0, perm=None):
    """Quantizes activations x [..., K] (float16 or bfloat16, on a CUDA device) with
    hm_quantize_activation_device on torch's current stream. dtype: "e4m3", "e5m2" or "int8";
    group_k: 0 for one scale per token, else a multiple of 8 (one scale per token and group);
    perm: optional int32 [K] tensor on the same device (output column j reads x[..., perm[j]]).
    Returns (codes, scales): codes of torch dtype float8_e4m3fn / float8_e5m2 / int8 with x's
    shape, scales float32 [..., G], G = 1 or ceil(K / group_k)."""
    from ._dtype import as_dtype
    from ._quant_device import activation_scale_groups, quantize_activation_device
    name = as_dtype(dtype).name
    if name not in _CODE_DTYPES:
        raise argument_error(f"dtype {name}: the device quantizer writes e4m3, e5m2 or int8")
    if x.dtype not in (torch.float16, torch.bfloat16):
        raise argument_error(f"x has dtype {x.dtype}, expected torch.float16 or torch.bfloat16")
    lead, k = tuple(x.shape[:-1]), int(x.shape[-1])
    x2 = x.contiguous().view(-1, k)
    groups = activation_scale_groups(k, group_k)
    codes = torch.empty(x2.shape, dtype=_CODE_DTYPES[name], device=x.device)
    scales = torch.empty((x2.shape[0], groups), dtype=torch.float32, device=x.device)
    if perm is not None:
        perm = perm.to(device=x.device, dtype=torch.int32).contiguous()
    stream = torch.cuda.current_stream(x.device).cuda_stream
    quantize_activation_device(context_for(x.device), x2, name, group_k=group_k, perm=perm,
                               codes=codes.view(torch.uint8), scales=scales, stream=stream)
    return codes.view(*lead, k), scales.view(*lead, groups)
# ---- MoE routing (docs/moe.md) ------------------------------------------------------------------
def moe_align(topk_ids, num_experts, block_size, expert_map=None, *, num_local_experts=0,
              with_counts=False):
    """The indexed MoE layout of int32 topk_ids [T, top_k] on its device, on the current torch
    stream: (sorted_ids, expert_ids, num_tokens_padded, expert_offsets[, expert_counts]) as int32
    tensors of fixed capacities (num_tokens_padded stays on the device: one-element tensor).
    expert_map: optional int32 [num_experts] global -> local (-1: not on this rank)."""
    from . import _moe
    if topk_ids.dtype != torch.int32:
        raise argument_error(f"topk_ids must be int32, got {topk_ids.dtype}")
    ctx = context_for(topk_ids.device)
    sizes = _moe.moe_align_sizes(topk_ids.shape[0], topk_ids.shape[1], num_experts, block_size,
                                 num_local_experts=num_local_experts,
                                 has_expert_map=expert_map is not None)
    empty = lambda n: torch.empty(n, dtype=torch.int32, device=topk_ids.device)  # noqa: E731
    out = _moe.MoeAlignResult(empty(sizes.sorted_ids), empty(sizes.expert_ids), empty(1),
                              empty(sizes.expert_offsets),
                              empty(sizes.expert_counts) if with_counts else None)
    stream = torch.cuda.current_stream(topk_ids.device).cuda_stream
    _moe.moe_align(ctx, topk_ids.contiguous(), num_experts, block_size, expert_map=expert_map,
                   num_local_experts=num_local_experts, out=out, stream=stream)
    result = (out.sorted_ids, out.expert_ids, out.num_tokens_padded, out.expert_offsets)
    return result + (out.expert_counts,) if with_counts else result


def moe_reduce(input, topk_weights, topk_ids, num_experts, expert_map=None, *,
               num_local_experts=0, out=None):
    """out[t] = sum_j topk_weights[t, j] * input[t * top_k + j] over kept assignments (f32
    accumulation, one rounding), for float16/bfloat16 input [T * top_k, N], float32 weights
    [T, top_k] and int32 topk_ids [T, top_k]; returns out [T, N] (allocated when None)."""
    from . import _moe
    tokens = topk_ids.shape[0]
    if out is None:
        out = torch.empty((tokens, input.shape[-1]), dtype=input.dtype, device=input.device)
    if tokens == 0:
        return out
    ctx = context_for(input.device)
    stream = torch.cuda.current_stream(input.device).cuda_stream
    _moe.moe_reduce(ctx, input.contiguous(), topk_weights.contiguous(), topk_ids.contiguous(),
                    num_experts, expert_map=expert_map, num_local_experts=num_local_experts,
                    out=out, stream=stream)
    return out


class MoE(_FormatDtypes, torch.nn.Module):
    """A fused-MoE drop-in (the engine's `fused_experts(x, w13, w2, topk_weights, topk_ids)`):

        y[t] = sum_j topk_weights[t, j] * down_e(silu(gate_e(x[t])) * up_e(x[t])),  e = topk_ids[t, j]

    with gate_up a MoE format of N = 2 * I (gate rows first, then up rows), K = H, and down one
    of N = H, K = I, both with the same E. forward() runs, on the current torch stream with no
    host synchronization: moe_align (for the gate_up plan's block size), the indexed MoE GEMM of
    gate_up, SiLU * up (torch), moe_align again when the down plan's block size differs (the
    down GEMM's rows are the assignments: top_k = 1 over the flattened routing), the down GEMM,
    and moe_reduce. Assignments of experts outside [0, E) (or mapped to -1 by expert_map) are
    dropped: they add nothing to their token. Works under CUDA graph capture."""

    def __init__(self, gate_up_format, gate_up_packed, down_format, down_packed, *, device=None,
                 context=None):
        super().__init__()
        gu = gate_up_format if isinstance(gate_up_format, Format) else Format(gate_up_format)
        dn = down_format if isinstance(down_format, Format) else Format(down_format)
        n_gu, hidden, experts = gu.shape
        n_dn, inter, experts_dn = dn.shape
        if experts < 2 or experts != experts_dn:
            raise argument_error(f"MoE needs two formats with the same e >= 2, got e={experts} and "
                                 f"e={experts_dn}")
        if n_gu != 2 * inter or n_dn != hidden:
            raise argument_error(f"gate_up must be [E, 2 * I, H] and down [E, H, I]: got gate_up "
                                 f"N={n_gu} K={hidden}, down N={n_dn} K={inter}")
        if gu.bias or dn.bias:
            raise argument_error("humming.torch.MoE takes formats without bias")
        device = torch.device(device if device is not None else "cuda")
        self.context = context or context_for(device)
        self.device = torch.device("cuda", self.context.device)
        self.num_experts, self.hidden, self.intermediate = experts, hidden, inter
        # The layer's dtype is its output's, f16 or bf16 in both formats; each GEMM's input is
        # that dtype too, or an 8-bit activation (e4m3 / e5m2 / int8, with or without activation
        # groups) quantized from it on the device before the GEMM, as Linear does.
        self.dtype = _HM_TO_TORCH.get(gu.output.name)
        self.gate_up_activation = _activation_codes(gu)
        self.down_activation = _activation_codes(dn)
        for fmt, (codes, _) in ((gu, self.gate_up_activation), (dn, self.down_activation)):
            if self.dtype not in (torch.float16, torch.bfloat16) or \
                    _HM_TO_TORCH.get(fmt.output.name) != self.dtype or \
                    (codes is None and _HM_TO_TORCH.get(fmt.activation.name) != self.dtype):
                raise argument_error(
                    "humming.torch.MoE runs f16 or bf16 outputs, the same in both formats, with "
                    "activations of that dtype or e4m3 / e5m2 / int8 (quantized from it); got "
                    f"gate_up a={gu.activation.name} c={gu.output.name}, down "
                    f"a={dn.activation.name} c={dn.output.name}")

        def up(value):
            if value is None:
                return None
            if isinstance(value, torch.Tensor):
                return value.to(self.device).contiguous()
            return torch.from_numpy(np.ascontiguousarray(value)).to(self.device)
        for prefix, packed in (("gate_up_", gate_up_packed), ("down_", down_packed)):
            for name in ("weight", "scales", "zero_points", "global_scale"):
                self.register_buffer(prefix + name, up(getattr(packed, name, None)))
        self.gate_up_format, self.down_format = gu.clone(), dn.clone()
        self.gate_up_plan = Plan(self.context, gu).prepare()
        self.down_plan = Plan(self.context, dn).prepare()

    @classmethod
    def from_weights(cls, w_gate_up, w_down, gate_up_format="w=uint4b8 a=f16 c=f16 s=f16:g128",
                     down_format=None, *, device=None):
        """Quantizes float expert weights w_gate_up [E, 2 * I, H] and w_down [E, H, I] (tensors
        or arrays) into the two formats (shapes set from the weights; down_format defaults to
        gate_up_format's dtypes and scales)."""
        def host(w):
            return (w.detach().float().cpu().numpy() if isinstance(w, torch.Tensor)
                    else np.asarray(w, dtype=np.float32))
        gu_w, dn_w = host(w_gate_up), host(w_down)
        if gu_w.ndim != 3 or dn_w.ndim != 3:
            raise argument_error("w_gate_up and w_down must be [E, N, K]")
        gu, dn = Format(gate_up_format), Format(down_format or gate_up_format)
        gu.set_shape(gu_w.shape[1], gu_w.shape[2], gu_w.shape[0])
        dn.set_shape(dn_w.shape[1], dn_w.shape[2], dn_w.shape[0])
        return cls(gu, gu.pack(gu.quantize(gu_w)), dn, dn.pack(dn.quantize(dn_w)), device=device)

    @classmethod
    def from_converted(cls, path, experts, *, device=None):
        """The MoE layer whose stacked experts are `experts` + ".gate_up_proj" and ".down_proj"
        (Mixtral's ".w13" and ".w2") in a folder converted with stacked experts and gate and up
        joined (humming convert --stack-experts --join-gate-up), e.g.
        experts="model.layers.3.mlp.experts"."""
        pairs = [[f"{experts}.{gate_up}", f"{experts}.{down}"]
                 for gate_up, down in (("gate_up_proj", "down_proj"), ("w13", "w2"))]
        with StoredModel(path) as stored:  # one open: the names, then the two layers
            names = next((p for p in pairs if set(stored.layers).issuperset(p)), None)
            if names is None:
                raise argument_error(f"{os.fspath(path)!r} has no {experts}.gate_up_proj and "
                                     f"{experts}.down_proj (nor .w13 and .w2): convert the model "
                                     f"with --stack-experts --join-gate-up")
            gu, dn = stored.read(names[0]), stored.read(names[1])
        for name, layer in zip(names, (gu, dn)):
            if layer.k_permutation is not None or layer.bias is not None:
                raise argument_error(f"{name} has a K permutation or a bias, which "
                                     f"humming.torch.MoE does not take")
        return cls(gu.format, gu.packed, dn.format, dn.packed, device=device)

    def forward(self, x, topk_ids, topk_weights, expert_map=None):
        """x [T, H] (the layer's dtype), topk_ids int32 [T, top_k], topk_weights float32
        [T, top_k]; expert_map: optional int32 [global experts] -> local (-1: another rank),
        this layer holding the E local experts. Returns [T, H]."""
        if x.dim() != 2 or x.shape[1] != self.hidden or x.dtype != self.dtype:
            raise argument_error(f"x must be [T, {self.hidden}] {self.dtype}, got "
                                 f"{tuple(x.shape)} {x.dtype}")
        tokens, top_k = topk_ids.shape
        if tokens != x.shape[0] or topk_weights.shape != topk_ids.shape:
            raise argument_error("topk_ids and topk_weights must be [T, top_k] for x's T tokens")
        if tokens == 0:
            return torch.empty_like(x)
        x = x.contiguous()
        stream = torch.cuda.current_stream(x.device).cuda_stream
        global_experts = expert_map.shape[0] if expert_map is not None else self.num_experts
        local = self.num_experts if expert_map is not None else 0

        def routed(ids, block):
            sorted_ids, expert_ids, padded, _ = moe_align(
                ids, global_experts, block, expert_map, num_local_experts=local)
            return dict(sorted_ids=sorted_ids, expert_ids=expert_ids, num_tokens_padded=padded)

        gate_up = DevicePackedWeight(self.gate_up_weight, self.gate_up_scales,
                                     self.gate_up_zero_points, self.gate_up_global_scale)
        down = DevicePackedWeight(self.down_weight, self.down_scales, self.down_zero_points,
                                  self.down_global_scale)
        ids = topk_ids.contiguous()
        h = torch.empty((tokens * top_k, 2 * self.intermediate), dtype=self.dtype, device=x.device)
        block_up = self.gate_up_plan.moe_block_size(tokens)
        block_down = self.down_plan.moe_block_size(tokens * top_k)
        first = routed(ids, block_up)
        a, scales = _quantized_input(x, *self.gate_up_activation)
        self.gate_up_plan.moe_gemm(a, gate_up, h, top_k=top_k, act_scales=scales, stream=stream,
                                   **first)
        act = (torch.nn.functional.silu(h[:, :self.intermediate]) *
               h[:, self.intermediate:]).contiguous()
        act, act_scales = _quantized_input(act, *self.down_activation)
        # The down GEMM's rows are the assignments themselves (top_k = 1 over the flat routing).
        if block_down == block_up:
            second = first  # same ids, same padding: row f of act is flat id f
        else:
            second = routed(ids.view(-1, 1), block_down)
        out = torch.empty((tokens * top_k, self.hidden), dtype=self.dtype, device=x.device)
        self.down_plan.moe_gemm(act, down, out, top_k=1, act_scales=act_scales, stream=stream,
                                **second)
        return moe_reduce(out, topk_weights.float().contiguous(), ids, global_experts,
                          expert_map, num_local_experts=local)

    def extra_repr(self):
        return f"gate_up {self.gate_up_format}, down {self.down_format}"
