"""Dtypes: the 32-bit codes of humming.h as an int subclass with names, parsing, decode/encode."""
from . import raw
from ._errors import check, copy_out


class DType(int):
    """A dtype code (humming.h, "Number formats"). Compares equal to the raw int code.

    DType("fp8") and DType.parse("fp8") parse a name or alias; DType(0x...) wraps a code."""

    def __new__(cls, value):
        if isinstance(value, DType):
            return value
        if isinstance(value, str):
            status, code = raw.hm_dtype_parse(value)
            check(status)
            return super().__new__(cls, code)
        return super().__new__(cls, int(value))

    parse = classmethod(lambda cls, name: cls(str(name)))

    @property
    def name(self):
        """The canonical name ("f16"), which parses back to the same code."""
        return copy_out(raw.hm_dtype_name, int(self))

    @property
    def bits(self):
        return int(self) & 0xFF

    @property
    def kind(self):
        """HM_DTYPE_KIND_* (humming.DTYPE_KIND_*)."""
        return (int(self) >> 24) & 0xF

    def decode(self, code):
        """The exact value of one code (a dtype of at most 8 bits, or an f16/bf16 pattern)."""
        status, value = raw.hm_dtype_decode(int(self), int(code))
        check(status)
        return value

    def encode(self, value):
        """The code nearest to `value` (round to nearest even, saturating)."""
        status, code = raw.hm_dtype_encode(int(self), float(value))
        check(status)
        return code

    def __repr__(self):
        if int(self) == 0:
            return "DType(none)"
        try:
            return f"DType({self.name})"
        except Exception:  # an invalid code still gets a repr
            return f"DType(0x{int(self):08x})"

    __str__ = lambda self: self.name if int(self) else "none"


# The HM_DTYPE_* constants of the header (SWIG cannot evaluate their cast expressions, so raw.i
# re-exports them through the C compiler; the coverage test checks that every one is here).
DType.NONE = DType(raw.HM_DTYPE_NONE)
for _name in dir(raw):
    if _name.startswith("HM_DTYPE_") and not _name.startswith("HM_DTYPE_KIND_"):
        setattr(DType, _name[len("HM_DTYPE_"):], DType(getattr(raw, _name)))
del _name


def as_dtype(value, what="dtype"):
    """A DType from a DType, an int code or a name."""
    if value is None:
        return DType.NONE
    return DType(value)
