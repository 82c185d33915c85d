"""MoE routing helpers on the device (hm_moe_align_sizes, hm_moe_align, hm_moe_reduce; see
docs/moe.md): the indexed layout of a router's top-k choices for the MoE GEMM, and the top-k
weighted sum of the down projection's rows. Asynchronous on `stream`, no host synchronization,
capturable in a CUDA graph once the kernel has been compiled by a first call."""
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import raw
from ._device import check_device_tensor
from ._errors import argument_error, check
from ._dtype import DType


@dataclass(frozen=True)
class MoeAlignSizes:
    """Capacities (int32 elements) of moe_align's outputs."""
    sorted_ids: int
    expert_ids: int
    expert_offsets: int
    expert_counts: int


@dataclass
class MoeAlignResult:
    """moe_align's output buffers (device tensors, as given or allocated)."""
    sorted_ids: Any
    expert_ids: Any
    num_tokens_padded: Any
    expert_offsets: Any
    expert_counts: Any = None


def _routing(num_tokens, top_k, num_experts, num_local_experts=0, topk_ids=0, expert_map=0):
    r = raw.hm_moe_routing_t()
    raw.hm_moe_routing_init(r)
    r.topk_ids = int(topk_ids)
    r.num_tokens = int(num_tokens)
    r.top_k = int(top_k)
    r.num_experts = int(num_experts)
    r.num_local_experts = int(num_local_experts)
    r.expert_map = int(expert_map)
    return r


def moe_align_sizes(num_tokens, top_k, num_experts, block_size, *, num_local_experts=0,
                    has_expert_map=False):
    """The capacities of moe_align's buffers for these shapes (host only)."""
    r = _routing(num_tokens, top_k, num_experts, num_local_experts,
                 expert_map=1 if has_expert_map else 0)
    s = raw.hm_moe_align_sizes_t()
    raw.hm_moe_align_sizes_init(s)
    check(raw.hm_moe_align_sizes(r, int(block_size), s))
    return MoeAlignSizes(s.sorted_ids, s.expert_ids, s.expert_offsets, s.expert_counts)


def _topk(context, topk_ids, expert_map, num_experts, stream):
    t = check_device_tensor(topk_ids, "topk_ids", context.device, stream=stream)
    if t.dtype != "int32" or len(t.shape) != 2:
        raise argument_error(f"argument 'topk_ids' must be int32 [num_tokens, top_k], got "
                             f"{t.dtype} {tuple(t.shape)}")
    m = None
    if expert_map is not None:
        m = check_device_tensor(expert_map, "expert_map", context.device, stream=stream)
        if m.dtype != "int32" or tuple(m.shape) != (int(num_experts),):
            raise argument_error(f"argument 'expert_map' must be int32 [{num_experts}], got "
                                 f"{m.dtype} {tuple(m.shape)}")
    return t, m


def moe_align(context, topk_ids, num_experts, block_size, *, expert_map=None,
              num_local_experts=0, out=None, stream=0):
    """Aligns int32 topk_ids [T, top_k] for a MoE GEMM with token blocks of `block_size`.

    expert_map: optional int32 [num_experts] global -> local expert (-1: not on this rank), with
    num_local_experts (0: num_experts). out: a MoeAlignResult of int32 device buffers of at least
    moe_align_sizes' capacities (expert_counts may be None), or None to allocate DeviceArrays."""
    t, m = _topk(context, topk_ids, expert_map, num_experts, stream)
    tokens, top_k = int(t.shape[0]), int(t.shape[1])
    sizes = moe_align_sizes(tokens, top_k, num_experts, block_size,
                            num_local_experts=num_local_experts, has_expert_map=m is not None)
    if out is None:
        out = MoeAlignResult(context.empty(sizes.sorted_ids, np.int32),
                             context.empty(sizes.expert_ids, np.int32),
                             context.empty(1, np.int32),
                             context.empty(sizes.expert_offsets, np.int32),
                             context.empty(sizes.expert_counts, np.int32))
    o = raw.hm_moe_align_out_t()
    raw.hm_moe_align_out_init(o)
    keep = [t, m]
    for field, count in (("sorted_ids", sizes.sorted_ids), ("expert_ids", sizes.expert_ids),
                         ("num_tokens_padded", 1), ("expert_offsets", sizes.expert_offsets),
                         ("expert_counts", sizes.expert_counts)):
        value = getattr(out, field)
        if value is None:
            if field != "expert_counts":
                raise argument_error(f"out.{field} is None; only expert_counts is optional")
            continue
        d = check_device_tensor(value, "out." + field, context.device, min_bytes=4 * count,
                                stream=stream, writable=True)
        if d.itemsize != 4:
            raise argument_error(f"out.{field} must hold int32 elements, got {d.dtype}")
        keep.append(d)
        setattr(o, field, d.ptr)
    r = _routing(tokens, top_k, num_experts, num_local_experts, t.ptr, m.ptr if m else 0)
    with context.using() as h:
        check(raw.hm_moe_align(h, r, int(block_size), o, int(stream)))
    del keep
    return out


_VALUE_DTYPES = {"float16": raw.HM_DTYPE_F16, "bfloat16": raw.HM_DTYPE_BF16}


def moe_reduce(context, input, topk_weights, topk_ids, num_experts, *, expert_map=None,
               num_local_experts=0, out=None, stream=0):
    """out[t] = sum_j topk_weights[t, j] * input[t * top_k + j] over kept assignments.

    input: float16/bfloat16 [T * top_k, N] (the down projection's rows in flat-id order);
    topk_weights: float32 [T, top_k]; out: [T, N] of input's dtype, or None to allocate a
    DeviceArray (float16 only: numpy has no bfloat16)."""
    t, m = _topk(context, topk_ids, expert_map, num_experts, stream)
    tokens, top_k = int(t.shape[0]), int(t.shape[1])
    x = check_device_tensor(input, "input", context.device, stream=stream)
    dtype = _VALUE_DTYPES.get(x.dtype)
    if dtype is None or len(x.shape) != 2 or int(x.shape[0]) != tokens * top_k:
        raise argument_error(f"argument 'input' must be float16 or bfloat16 [{tokens * top_k}, N], "
                             f"got {x.dtype} {tuple(x.shape)}")
    n = int(x.shape[1])
    w = check_device_tensor(topk_weights, "topk_weights", context.device, stream=stream,
                            dtype=DType.F32, shape=(tokens, top_k))
    if out is None:
        if x.dtype != "float16":
            raise argument_error("pass `out` for bfloat16 values (numpy has no bfloat16)")
        out = context.empty((tokens, n), np.float16)
    y = check_device_tensor(out, "out", context.device, stream=stream, shape=(tokens, n),
                            writable=True)
    if y.dtype != x.dtype:
        raise argument_error(f"argument 'out' has dtype {y.dtype}, input has {x.dtype}")
    a = raw.hm_moe_reduce_args_t()
    raw.hm_moe_reduce_args_init(a)
    a.dtype = dtype
    a.n = n
    a.input = x.ptr
    a.topk_weights = w.ptr
    a.out = y.ptr
    r = _routing(tokens, top_k, num_experts, num_local_experts, t.ptr, m.ptr if m else 0)
    with context.using() as h:
        check(raw.hm_moe_reduce(h, r, a, int(stream)))
    del t, m, x, w, y
    return out
