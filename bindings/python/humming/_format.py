"""Layer formats, and the host paths that use them: quantize, dequantize, pack, unpack."""
from dataclasses import dataclass
from typing import Optional

import numpy as np

from . import raw
from ._dtype import DType, as_dtype
from ._errors import argument_error, check, copy_out
from ._handle import Handle
from ._host import host_array, weight_dtype, as_array

# HM_SCALE_* as names, for reprs and for Format.set_scale("group", ...).
SCALE_KINDS = {
    "none": raw.HM_SCALE_NONE,
    "channel": raw.HM_SCALE_CHANNEL,
    "group": raw.HM_SCALE_GROUP,
    "block": raw.HM_SCALE_BLOCK,
    "tensor": raw.HM_SCALE_TENSOR,
    "group_tensor": raw.HM_SCALE_GROUP_TENSOR,
}


@dataclass(frozen=True)
class Scale:
    kind: int
    group_k: int
    group_n: int


@dataclass(frozen=True)
class CanonicalSizes:
    codes: int
    scales: int
    zero_points: int
    global_scale: int


@dataclass(frozen=True)
class PackedSizes:
    weight: int
    scales: int
    zero_points: int
    global_scale: int
    n_padded: int
    k_padded: int


@dataclass
class CanonicalWeight:
    """Canonical (unpacked) quantized weights on the host (humming.h: codes uint8 [E][N][K],
    scales / zero_points float32, global_scale float32 [E]; None where the format has none)."""
    codes: np.ndarray
    scales: Optional[np.ndarray] = None
    zero_points: Optional[np.ndarray] = None
    global_scale: Optional[np.ndarray] = None


@dataclass
class PackedWeight:
    """Standard-layout buffers as bytes (uint8 arrays; global_scale is float32)."""
    weight: np.ndarray
    scales: Optional[np.ndarray] = None
    zero_points: Optional[np.ndarray] = None
    global_scale: Optional[np.ndarray] = None


class Format(Handle):
    """One linear (or MoE) layer: C[M,N] = A[M,K] * dequant(W)[N,K]^T (+ bias).

    Format() is the default format; Format("w=int4 a=f16 n=4096 k=4096") parses the canonical
    string (docs/format.md); str(fmt) prints it. Formats compare by value."""

    _destroy = staticmethod(raw.hm_format_destroy)

    def __init__(self, text=None):
        if text is None:
            status, handle = raw.hm_format_create()
        else:
            status, handle = raw.hm_format_parse(str(text))
        check(status)
        super().__init__(handle)

    @classmethod
    def parse(cls, text):
        return cls(text)

    @classmethod
    def _adopt(cls, handle):
        fmt = cls.__new__(cls)
        Handle.__init__(fmt, handle)
        return fmt

    def clone(self):
        status, handle = raw.hm_format_clone(self.handle)
        check(status)
        return Format._adopt(handle)

    __copy__ = clone

    def __str__(self):
        return copy_out(raw.hm_format_to_string, self.handle)

    def __repr__(self):
        if self.closed:
            return "Format(<closed>)"
        return f"Format({str(self)!r})"

    def __eq__(self, other):
        if not isinstance(other, Format):
            return NotImplemented
        return raw.hm_format_equal(self.handle, other.handle) == 1

    __hash__ = None  # mutable

    # ---- dtypes by role ------------------------------------------------------------------
    def get_dtype(self, role):
        status, code = raw.hm_format_get_dtype(self.handle, int(role))
        check(status)
        return DType(code)

    def set_dtype(self, role, dtype):
        check(raw.hm_format_set_dtype(self.handle, int(role), int(as_dtype(dtype))))

    def _role(role):  # noqa: N805 — a property factory used in the class body
        return property(lambda self: self.get_dtype(role),
                        lambda self, value: self.set_dtype(role, value))

    weight = _role(raw.HM_ROLE_WEIGHT)
    activation = _role(raw.HM_ROLE_ACTIVATION)
    output = _role(raw.HM_ROLE_OUTPUT)
    scale_dtype = _role(raw.HM_ROLE_SCALE)
    zero_point = _role(raw.HM_ROLE_ZERO_POINT)
    accumulator = _role(raw.HM_ROLE_ACCUMULATOR)
    del _role

    # ---- scales, shape, bias ---------------------------------------------------------------
    @property
    def scale(self):
        status, kind, group_k, group_n = raw.hm_format_get_scale(self.handle)
        check(status)
        return Scale(kind, group_k, group_n)

    def set_scale(self, kind, group_k=0, group_n=0):
        """kind: HM_SCALE_* or one of "none", "channel", "group", "block", "tensor",
        "group_tensor"."""
        if isinstance(kind, str):
            kind = SCALE_KINDS[kind]
        check(raw.hm_format_set_scale(self.handle, int(kind), int(group_k), int(group_n)))

    @property
    def shape(self):
        """(n, k, experts)."""
        status, n, k, experts = raw.hm_format_get_shape(self.handle)
        check(status)
        return n, k, experts

    def set_shape(self, n, k, experts=1):
        check(raw.hm_format_set_shape(self.handle, int(n), int(k), int(experts)))

    n = property(lambda self: self.shape[0])
    k = property(lambda self: self.shape[1])
    experts = property(lambda self: self.shape[2])

    @property
    def bias(self):
        status, has_bias = raw.hm_format_get_bias(self.handle)
        check(status)
        return bool(has_bias)

    @bias.setter
    def bias(self, value):
        check(raw.hm_format_set_bias(self.handle, 1 if value else 0))

    @property
    def activation_groups(self):
        """The K group of the activation scales: 0 for one f32 scale per token ([M]), else one
        per token and group_k inputs ([M][ceil(K / group_k)]; "a=e4m3:g128")."""
        status, group_k = raw.hm_format_get_activation_groups(self.handle)
        check(status)
        return int(group_k)

    @activation_groups.setter
    def activation_groups(self, group_k):
        check(raw.hm_format_set_activation_groups(self.handle, int(group_k)))

    def validate(self, arch=None):
        """Raises UnsupportedError naming the rule when the format cannot run on `arch`
        ("sm_90a", ...), or on any architecture when arch is None."""
        check(raw.hm_format_validate(self.handle, arch))

    def kernels(self, arch=None):
        """The kernel families that run this format on `arch` (any target when None), e.g.
        ["dense_wgmma", "dense_mma"]. Raises UnsupportedError saying what is missing when the
        format is valid but no kernel runs it yet (hm_plan_create refuses exactly those)."""
        return copy_out(raw.hm_format_kernels, self.handle, arch).split()

    # ---- sizes -----------------------------------------------------------------------------
    def canonical_sizes(self):
        sizes = raw.hm_canonical_sizes_t()
        raw.hm_canonical_sizes_init(sizes)
        check(raw.hm_format_canonical_sizes(self.handle, sizes))
        return CanonicalSizes(sizes.codes, sizes.scales, sizes.zero_points, sizes.global_scale)

    def packed_sizes(self):
        sizes = raw.hm_packed_sizes_t()
        raw.hm_packed_sizes_init(sizes)
        check(raw.hm_format_packed_sizes(self.handle, sizes))
        return PackedSizes(sizes.weight, sizes.scales, sizes.zero_points, sizes.global_scale,
                           sizes.n_padded, sizes.k_padded)

    def _weight_shapes(self):
        n, k, e = self.shape
        return [(e, n, k)] + ([(n, k)] if e == 1 else [])

    # ---- host quantization and layout ------------------------------------------------------
    def empty_canonical(self):
        """Zeroed canonical buffers sized for this format."""
        s = self.canonical_sizes()
        return CanonicalWeight(
            codes=np.zeros(s.codes, np.uint8),
            scales=np.zeros(s.scales, np.float32) if s.scales else None,
            zero_points=np.zeros(s.zero_points, np.float32) if s.zero_points else None,
            global_scale=np.zeros(s.global_scale, np.float32) if s.global_scale else None)

    def empty_packed(self):
        """Zeroed standard-layout buffers sized for this format."""
        s = self.packed_sizes()
        return PackedWeight(
            weight=np.zeros(s.weight, np.uint8),
            scales=np.zeros(s.scales, np.uint8) if s.scales else None,
            zero_points=np.zeros(s.zero_points, np.uint8) if s.zero_points else None,
            global_scale=np.zeros(s.global_scale // 4, np.float32) if s.global_scale else None)

    def _canonical_struct(self, canonical, writable):
        """A hm_canonical_weight_t over checked buffers (the arrays must outlive its use)."""
        sizes = self.canonical_sizes()
        struct = raw.hm_canonical_weight_t()
        raw.hm_canonical_weight_init(struct)
        _, struct.codes = host_array(canonical.codes, "codes", np.uint8, sizes.codes,
                                     writable=writable)
        for field, dtype in (("scales", np.float32), ("zero_points", np.float32),
                             ("global_scale", np.float32)):
            count = getattr(sizes, field)
            value = getattr(canonical, field)
            if count:
                if value is None:
                    raise _missing(field, count)
                _, addr = host_array(value, field, dtype, count, writable=writable)
                setattr(struct, field, addr)
        return struct

    def _packed_struct(self, packed, writable):
        sizes = self.packed_sizes()
        struct = raw.hm_packed_weight_t()
        raw.hm_packed_weight_init(struct)
        for field in ("weight", "scales", "zero_points", "global_scale"):
            nbytes = getattr(sizes, field)
            value = getattr(packed, field)
            if not nbytes:
                continue
            if value is None:
                raise _missing(field, nbytes, "bytes")
            arr = as_array(value, field)
            if arr.nbytes != nbytes:
                raise argument_error(f"argument '{field}' has {arr.nbytes} bytes, the packed "
                                     f"layout of this format needs {nbytes}")
            _, addr = host_array(arr, field, arr.dtype, writable=writable)
            setattr(struct, field, addr)
        return struct

    def quantize(self, weight):
        """Quantizes a host weight [N, K] or [E, N, K] (float32, float16 or bfloat16) into new
        canonical buffers."""
        arr, addr = host_array(weight, "weight", _float_dtypes(weight), shapes=self._weight_shapes())
        out = self.empty_canonical()
        struct = self._canonical_struct(out, writable=True)
        check(raw.hm_quantize(self.handle, addr, int(weight_dtype(arr, "weight")), struct))
        return out

    def dequantize(self, canonical):
        """Canonical buffers back to a float32 weight [E, N, K] ([N, K] for a dense layer)."""
        struct = self._canonical_struct(canonical, writable=False)
        n, k, e = self.shape
        out = np.empty((e, n, k) if e > 1 else (n, k), np.float32)
        check(raw.hm_dequantize(self.handle, struct, out.__array_interface__["data"][0]))
        return out

    def pack(self, canonical):
        """Canonical buffers -> new standard-layout buffers (exactly invertible by unpack)."""
        src = self._canonical_struct(canonical, writable=False)
        out = self.empty_packed()
        check(raw.hm_pack(self.handle, src, self._packed_struct(out, writable=True)))
        return out

    def unpack(self, packed):
        """Standard-layout buffers -> new canonical buffers."""
        src = self._packed_struct(packed, writable=False)
        out = self.empty_canonical()
        check(raw.hm_unpack(self.handle, src, self._canonical_struct(out, writable=True)))
        return out

    def quantize_and_pack(self, weight):
        return self.pack(self.quantize(weight))


def _float_dtypes(weight):
    names = ["float32", "float16"]
    arr = as_array(weight, "weight")
    if arr.dtype.name == "bfloat16":
        names.append(arr.dtype)
    return tuple(names)


def _missing(field, count, unit="elements"):
    return argument_error(f"argument '{field}' is None, but this format needs {count} {unit} of it")


def support_matrix():
    """The support matrix as text (what `humming support` prints)."""
    return copy_out(raw.hm_support_matrix)
