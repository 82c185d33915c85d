"""Plans: one layer (a Format) on one context, prepared once and then run many times."""
import math
import threading
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from . import raw
from ._device import check_device_tensor
from ._dtype import DType
from ._errors import argument_error, check, copy_out
from ._format import Format, PackedWeight
from ._handle import Handle
from ._runtime import LaunchParams

NONDETERMINISTIC = raw.HM_PLAN_NONDETERMINISTIC


@dataclass
class DevicePackedWeight:
    """Standard-layout buffers in device memory: any device tensors (torch, CuPy, DeviceArray).
    Fields the format does not use stay None."""
    weight: Any
    scales: Optional[Any] = None
    zero_points: Optional[Any] = None
    global_scale: Optional[Any] = None

    @classmethod
    def upload(cls, context, packed: PackedWeight):
        """Copies host standard-layout buffers (Format.pack's result) to the context's device."""
        def up(value):
            return None if value is None else context.to_device(value)
        return cls(up(packed.weight), up(packed.scales), up(packed.zero_points),
                   up(packed.global_scale))

    def close(self):
        for value in (self.weight, self.scales, self.zero_points, self.global_scale):
            if hasattr(value, "close"):
                value.close()


class Plan(Handle):
    """Binds a format to a context: validates it for the context's arch on creation, compiles
    every kernel it may pick in prepare(), then gemm() runs with no host synchronization and no
    allocation (CUDA-graph capturable). A prepared plan may be used from several threads."""

    _destroy = staticmethod(raw.hm_plan_destroy)

    def __init__(self, context, format, *, max_m=0, nondeterministic=False, tuning_json=None):
        if not isinstance(format, Format):
            format = Format(format)
        options = raw.hm_plan_options_t()
        raw.hm_plan_options_init(options)
        options.flags = NONDETERMINISTIC if nondeterministic else 0
        options.max_m = int(max_m)
        if tuning_json is not None:
            options.tuning_json = str(tuning_json)
        with context.using() as h:
            status, handle = raw.hm_plan_create(h, format.handle, options)
        check(status)
        super().__init__(handle)
        self.context = context
        self.format = format.clone()  # for the checks below; the plan has its own copy
        self.max_m = int(max_m)
        self._packed = self.format.packed_sizes()
        # What every gemm() checks against, read once (the plan's format never changes).
        self._n, self._k, self._experts = self.format.shape
        self._activation, self._output = self.format.activation, self.format.output
        self._bias = self.format.bias
        # Activation groups (a=e4m3:g128): scales [M][ceil(K / group_k)]; 0: one per row.
        self._act_group_k = self.format.activation_groups
        self._local = threading.local()

    def prepare(self):
        """Compiles (or loads from the cache) every kernel the plan can choose. The GIL is
        released while it runs."""
        check(raw.hm_plan_prepare(self.handle))
        return self

    def workspace_size(self, max_m=None):
        """Bytes of device workspace for calls with M up to max_m (default: the plan's max_m,
        which must then be set)."""
        if max_m is None:
            if not self.max_m:
                raise argument_error("argument 'max_m' is needed: the plan has no max_m")
            max_m = self.max_m
        status, nbytes = raw.hm_plan_workspace_size(self.handle, int(max_m))
        check(status)
        return nbytes

    def allocate_workspace(self, max_m=None):
        """A zeroed DeviceArray of workspace_size(max_m) bytes (the kernels leave it zeroed
        again, so it is allocated and cleared once), or None when no workspace is needed."""
        nbytes = self.workspace_size(max_m)
        if nbytes == 0:
            return None
        return self.context.to_device(np.zeros(nbytes, np.uint8))

    def moe_block_size(self, m):
        """MoE plans: the block size the routing step pads each expert's rows to, for a call
        with m tokens."""
        status, block = raw.hm_plan_moe_block_size(self.handle, int(m))
        check(status)
        return block

    def moe_rows(self, m, top_k):
        """MoE plans: the entries HM_ARG_SORTED_IDS must hold for m tokens and top_k experts
        each (EXPERT_IDS: moe_rows // moe_block_size)."""
        status, rows = raw.hm_plan_moe_rows(self.handle, int(m), int(top_k))
        check(status)
        return rows

    def _cleared_params(self, params):
        """The caller's launch params, or this thread's own (one per thread: they are not
        thread-safe), cleared for a call."""
        if params is None:
            params = getattr(self._local, "params", None)
            if params is None:
                params = self._local.params = LaunchParams()
        params.clear()
        return params

    def _set_weights(self, params, weight, bias, stream):
        """The weight-side slots: every buffer the format has (checked for size and device),
        the bias ([N], or [E, N] for a MoE format) when it has one."""
        device, n = self.context.device, self._n
        for field, slot in (("weight", raw.HM_ARG_B), ("scales", raw.HM_ARG_SCALES),
                            ("zero_points", raw.HM_ARG_ZEROS), ("global_scale", raw.HM_ARG_GLOBAL)):
            nbytes = getattr(self._packed, field)
            value = getattr(weight, field, None)
            if not nbytes:
                continue
            if value is None:
                raise argument_error(f"weight.{field} is None, but this format needs "
                                     f"{nbytes} bytes of it")
            t = check_device_tensor(value, "weight." + field, device, min_bytes=nbytes,
                                    stream=stream)
            params.set_pointer(slot, t.ptr)
        if self._bias:
            if bias is None:
                raise argument_error("argument 'bias' is None, but the format has a bias")
            shape = (n,) if self._experts == 1 else (self._experts, n)
            tb = check_device_tensor(bias, "bias", device, self._output, shape=shape,
                                     stream=stream)
            params.set_pointer(raw.HM_ARG_BIAS, tb.ptr)
        elif bias is not None:
            raise argument_error("argument 'bias' was given, but the format has no bias "
                                 "(set Format.bias = True)")

    def _act_scale_groups(self):
        """G, the scales per row of A: ceil(K / group_k) with activation groups, else 1."""
        g = self._act_group_k
        return -(-self._k // g) if g > 0 else 1

    def _set_act_scales(self, params, act_scales, m, stream):
        """HM_ARG_ACT_SCALES: for 8-bit activations (a=e4m3, a=e5m2, a=int8) the float32 scales of A's
        m rows, without which the codes mean nothing: [M] (one per row), or [M, G] with
        G = ceil(K / group_k) when the format has activation groups (a=e4m3:g128); for any other
        format a tensor given here is a mistake (the library refuses the slot too)."""
        act = self._activation
        if act not in (DType.E4M3, DType.E5M2, DType.INT8):
            if act_scales is not None:
                raise argument_error(f"argument 'act_scales' was given, but a={act.name} "
                                     "activations have no scales (only a=e4m3, a=e5m2 and "
                                     "a=int8 do)")
            return
        g = self._act_scale_groups()
        if self._act_group_k > 0:
            want = (f"shape ({m}, {g}): one per row and group of {self._act_group_k} along "
                    f"K = {self._k} (quantize_activation_device with "
                    f"group_k={self._act_group_k} writes them)")
        else:
            want = (f"shape ({m},): one per row of 'a' (quantize_activation_device with "
                    "group_k=0 writes them)")
        if act_scales is None:
            raise argument_error(f"argument 'act_scales' is None, but a={act.name} activations "
                                 f"need their float32 scales, {want}")
        ts = check_device_tensor(act_scales, "act_scales", self.context.device, stream=stream)
        if ts.dtype != "float32":
            raise argument_error(f"argument 'act_scales' has dtype {ts.dtype}, expected float32")
        # [M, 1] is what quantize_activation_device returns for group_k=0: the same bytes as
        # [M]; with activation groups [M, G] (or, when G = 1, [M] too).
        accepted = ((m, g),) + (((m,),) if g == 1 else ())
        if tuple(ts.shape) not in accepted:
            raise argument_error(f"argument 'act_scales' has shape {tuple(ts.shape)}, expected "
                                 f"{want}")
        params.set(act_scales=ts.ptr)

    def moe_gemm(self, a, weight, c, *, sorted_ids, expert_ids, num_tokens_padded, top_k,
                 bias=None, act_scales=None, stream=0, params=None):
        """MoE plans (e >= 2), indexed (docs/moe.md): C[M * top_k, N], row t * top_k + j =
        A[t] * dequant(W[expert of (t, j)])^T (+ bias[expert]), for a [M, K]. sorted_ids,
        expert_ids and num_tokens_padded are int32 device tensors laid out by moe_align with
        the plan's moe_block_size(M) (capacity moe_rows(M, top_k) at least); bias [E, N];
        act_scales as in gemm(). Rows of dropped assignments are not written. Asynchronous, no
        host read of the routing."""
        if self._experts == 1:
            raise argument_error("moe_gemm needs a plan of a MoE format (e >= 2); use gemm()")
        device = self.context.device
        n, k = self._n, self._k
        ta = check_device_tensor(a, "a", device, self._activation, stream=stream)
        if len(ta.shape) != 2 or ta.shape[1] != k:
            raise argument_error(f"argument 'a' has shape {ta.shape}, expected [M, {k}]")
        m, top_k = ta.shape[0], int(top_k)
        tc = check_device_tensor(c, "c", device, self._output, shape=(m * top_k, n),
                                 stream=stream, writable=True)
        rows = self.moe_rows(m, top_k)
        block = self.moe_block_size(m)
        routing = {}
        for name, obj, need in (("sorted_ids", sorted_ids, rows),
                                ("expert_ids", expert_ids, rows // block),
                                ("num_tokens_padded", num_tokens_padded, 1)):
            t = check_device_tensor(obj, name, device, stream=stream, min_bytes=4 * need)
            if t.dtype != "int32":
                raise argument_error(f"argument '{name}' has dtype {t.dtype}, expected int32")
            routing[name] = t.ptr
        params = self._cleared_params(params)
        params.set(a=ta.ptr, c=tc.ptr, m=m)
        params.set_pointer(raw.HM_ARG_SORTED_IDS, routing["sorted_ids"])
        params.set_pointer(raw.HM_ARG_EXPERT_IDS, routing["expert_ids"])
        params.set_pointer(raw.HM_ARG_NUM_TOKENS_PADDED, routing["num_tokens_padded"])
        params.set_int(raw.HM_ARG_TOP_K, top_k)
        self._set_act_scales(params, act_scales, m, stream)
        self._set_weights(params, weight, bias, stream)
        check(raw.hm_plan_gemm(self.handle, params.handle, int(stream)))

    def _grouped_call(self, mode, a, weight, c, a_shape, c_shape, m, slot, name, routing, need,
                      bias, act_scales, stream, params):
        """The grouped MoE modes' shared body: checks a, c, the int32 routing tensor of `need`
        entries and (8-bit activations) the scales of a's rows, then runs the plan with
        HM_ARG_MOE_MODE = mode and HM_ARG_M = m."""
        device = self.context.device
        ta = check_device_tensor(a, "a", device, self._activation, stream=stream)
        if tuple(ta.shape) != a_shape:
            raise argument_error(f"argument 'a' has shape {tuple(ta.shape)}, expected {a_shape}")
        tc = check_device_tensor(c, "c", device, self._output, shape=c_shape, stream=stream,
                                 writable=True)
        tr = check_device_tensor(routing, name, device, stream=stream, min_bytes=4 * need)
        if tr.dtype != "int32":
            raise argument_error(f"argument '{name}' has dtype {tr.dtype}, expected int32")
        params = self._cleared_params(params)
        params.set(a=ta.ptr, c=tc.ptr, m=m)
        params.set_int(raw.HM_ARG_MOE_MODE, mode)
        params.set_pointer(slot, tr.ptr)
        self._set_act_scales(params, act_scales, math.prod(a_shape[:-1]), stream)
        self._set_weights(params, weight, bias, stream)
        check(raw.hm_plan_gemm(self.handle, params.handle, int(stream)))

    def moe_gemm_contiguous(self, a, weight, c, *, expert_offsets, bias=None, act_scales=None,
                            stream=0, params=None):
        """MoE plans (e >= 2), grouped contiguous (docs/moe.md): a [M, K] with rows grouped by
        expert, c [M, N]; expert e owns rows expert_offsets[e] .. expert_offsets[e + 1] (an int32
        device tensor of E + 1 entries, read on the device and clamped to [0, M]); row r of c =
        a[r] * dequant(W[expert of r])^T (+ bias[expert]); act_scales as in gemm() for a's M
        rows. Rows outside every expert's run are not written. Asynchronous, no host read of the
        offsets."""
        if self._experts == 1:
            raise argument_error("moe_gemm_contiguous needs a plan of a MoE format (e >= 2); "
                                 "use gemm()")
        ta = check_device_tensor(a, "a", self.context.device, self._activation, stream=stream)
        if len(ta.shape) != 2:
            raise argument_error(f"argument 'a' has shape {tuple(ta.shape)}, expected "
                                 f"[M, {self._k}]")
        m = ta.shape[0]
        self._grouped_call(raw.HM_MOE_MODE_CONTIGUOUS, a, weight, c, (m, self._k), (m, self._n),
                           m, raw.HM_ARG_EXPERT_OFFSETS, "expert_offsets", expert_offsets,
                           self._experts + 1, bias, act_scales, stream, params)

    def moe_gemm_masked(self, a, weight, c, *, masked_m, bias=None, act_scales=None, stream=0,
                        params=None):
        """MoE plans (e >= 2), grouped masked (docs/moe.md): a [E, T_max, K], c [E, T_max, N];
        only the first masked_m[e] rows of expert e's slab are read and written (masked_m: an
        int32 device tensor of E entries, read on the device and clamped to [0, T_max]);
        act_scales as in gemm() for a's E * T_max rows taken as one [E * T_max, K] matrix.
        Asynchronous, no host read of the counts."""
        if self._experts == 1:
            raise argument_error("moe_gemm_masked needs a plan of a MoE format (e >= 2); "
                                 "use gemm()")
        e = self._experts
        ta = check_device_tensor(a, "a", self.context.device, self._activation, stream=stream)
        if len(ta.shape) != 3:
            raise argument_error(f"argument 'a' has shape {tuple(ta.shape)}, expected "
                                 f"[{e}, T_max, {self._k}]")
        t_max = ta.shape[1]
        self._grouped_call(raw.HM_MOE_MODE_MASKED, a, weight, c, (e, t_max, self._k),
                           (e, t_max, self._n), t_max, raw.HM_ARG_MASKED_M, "masked_m", masked_m,
                           e, bias, act_scales, stream, params)

    def describe(self, m):
        """The kernel and tiling used for M, for logs."""
        return copy_out(raw.hm_plan_describe, self.handle, int(m))

    def gemm(self, a, weight, c, *, bias=None, workspace=None, act_scales=None, stream=0,
             params=None):
        """C[M,N] = A[M,K] * dequant(W)^T (+ bias) on `stream` (an int CUstream; 0 is the
        default stream). a, c, bias and workspace are device tensors; weight is a
        DevicePackedWeight (or any object with the same attributes). 8-bit activations (a=e4m3,
        a=e5m2, a=int8): a is [M, K] codes (float8 or uint8) and act_scales, required there and refused
        elsewhere, their float32 [M] per-token scales (quantize_activation_device with
        group_k=0 writes both), or [M, ceil(K / group_k)] when the format has activation groups
        (a=e4m3:g128; the quantizer with that group_k writes them). Every tensor is checked for device, dtype, shape and contiguity
        first. Asynchronous."""
        device = self.context.device
        n, k = self._n, self._k
        act, out = self._activation, self._output
        ta = check_device_tensor(a, "a", device, act, stream=stream)
        a_cols = k if (int(act) & 0xFF) >= 8 else (k * (int(act) & 0xFF) + 7) // 8
        if len(ta.shape) != 2 or ta.shape[1] != a_cols:
            raise argument_error(f"argument 'a' has shape {ta.shape}, expected [M, {a_cols}] "
                                 f"(K = {k} in {act.name})")
        m = ta.shape[0]
        tc = check_device_tensor(c, "c", device, out, shape=(m, n), stream=stream, writable=True)
        params = self._cleared_params(params)
        params.set(a=ta.ptr, c=tc.ptr, m=m)
        self._set_act_scales(params, act_scales, m, stream)
        self._set_weights(params, weight, bias, stream)
        if workspace is not None:
            # Its size is checked by the library against what this M needs (and named there).
            tw = check_device_tensor(workspace, "workspace", device, stream=stream)
            params.set(workspace=tw.ptr, workspace_bytes=tw.nbytes)
        check(raw.hm_plan_gemm(self.handle, params.handle, int(stream)))
