// Dtype: validation of codes, exact decode, round-to-nearest-even encode with saturation, and the
// canonical names. The rules are written down in docs/dtypes.md; this file is their one
// implementation (the quantizer's fast tables in src/quant/code_table.* are checked against it).
#include "core/dtype.hpp"

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "core/error.hpp"
#include "core/quote.hpp"

namespace hm::core {
namespace {

constexpr int kMaxIntBits = 8;        // integers: 1..8 bits
constexpr int kMaxSmallFloatBits = 8;  // eXmY: sign + X + Y <= 8

uint32_t field(hm_dtype_t code, int shift, int width) {
  return (code >> shift) & ((1u << width) - 1u);
}

// Field positions of the code layout documented in include/humming.h (HM_DTYPE_MAKE).
constexpr int kBitsShift = 0, kExponentShift = 8, kMantissaShift = 16, kKindShift = 24,
              kVariantShift = 28;

std::string int_name(DtypeKind kind, int bits) {
  switch (kind) {
    case DtypeKind::kSignedInt:
      return "int" + std::to_string(bits);
    case DtypeKind::kUnsignedInt:
      return "uint" + std::to_string(bits);
    default:
      return "uint" + std::to_string(bits) + "b" + std::to_string(1 << (bits - 1));
  }
}

// Why a float shape is not a dtype, or "" when it is one.
std::string float_shape_problem(int e, int m, FloatVariant v) {
  const std::string shape = "e" + std::to_string(e) + "m" + std::to_string(m);
  if ((e == 5 && m == 10) || (e == 8 && m == 7) || (e == 8 && m == 23)) {
    if (v != FloatVariant::kIeee) return shape + " (f16/bf16/f32) exists only as the IEEE variant";
    return "";
  }
  if (e == 0) {
    if (m != 3) return shape + ": the only exponent-less float is e0m3";
    if (v != FloatVariant::kFinite) return "e0m3 has only the finite variant";
    return "";
  }
  if (e < 0 || m < 0 || 1 + e + m > kMaxSmallFloatBits)
    return shape + ": a signed float eXmY needs X >= 1 and X + Y <= 7 (8 bits with the sign), "
                   "or is f16 (e5m10), bf16 (e8m7), f32 (e8m23)";
  if (1 + e + m < kMaxSmallFloatBits && v != FloatVariant::kFinite)
    return shape + ": floats narrower than 8 bits have only the finite variant (every code is a "
                   "number, as in fp4/fp6)";
  if (v == FloatVariant::kIeee && (e < 2 || m < 1))
    return shape + ": the IEEE variant needs at least 2 exponent bits and 1 mantissa bit";
  return "";
}

FloatVariant default_variant(int e, int m) {
  if (e == 4 && m == 3) return FloatVariant::kFn;
  if (e == 5 && m == 2) return FloatVariant::kIeee;
  if (1 + e + m > kMaxSmallFloatBits) return FloatVariant::kIeee;  // f16, bf16, f32
  return FloatVariant::kFinite;
}

const char* variant_suffix(FloatVariant v) {
  switch (v) {
    case FloatVariant::kFinite:
      return "finite";
    case FloatVariant::kFn:
      return "fn";
    default:
      return "ieee";
  }
}

// The float parameters the codec needs, gathered once per call.
struct FloatShape {
  int e, m, bias;
  FloatVariant variant;
  bool has_sign;
  bool has_subnormals;  // false for ue8m0: code 0 is 2^-127, there is no zero
  uint32_t magnitude_mask() const { return (1u << (e + m)) - 1u; }
  uint32_t max_magnitude() const {
    switch (variant) {
      case FloatVariant::kFinite:
        return magnitude_mask();
      case FloatVariant::kFn:
        return magnitude_mask() - 1u;
      default:
        return (((1u << e) - 2u) << m) | ((1u << m) - 1u);
    }
  }
  // Value of a finite magnitude code.
  double magnitude_value(uint32_t c) const {
    const int32_t exponent = static_cast<int32_t>(c >> m);
    const uint32_t mantissa = c & ((1u << m) - 1u);
    if (exponent == 0 && has_subnormals) return std::ldexp(static_cast<double>(mantissa), 1 - bias - m);
    return std::ldexp(static_cast<double>((1u << m) | mantissa), exponent - bias - m);
  }
  // Largest magnitude code whose value is <= a, for 0 <= a < max value.
  uint32_t floor_magnitude(double a) const {
    if (!has_subnormals) {
      int exponent = std::ilogb(a);  // a >= smallest value here
      return static_cast<uint32_t>(exponent + bias);
    }
    const double min_normal = std::ldexp(1.0, 1 - bias);
    if (e == 0 || a < min_normal) return static_cast<uint32_t>(std::floor(std::ldexp(a, bias - 1 + m)));
    const int exponent = std::ilogb(a);
    const double fraction = std::ldexp(a, -exponent) - 1.0;  // [0, 1)
    const auto mantissa = static_cast<uint32_t>(std::floor(std::ldexp(fraction, m)));
    return (static_cast<uint32_t>(exponent + bias) << m) | mantissa;
  }
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Construction and validation

Dtype Dtype::integer(bool is_signed, int bits) {
  HM_REQUIRE(bits >= 1 && bits <= kMaxIntBits, HM_ERROR_INVALID_ARGUMENT,
             "integer dtypes have 1.." + std::to_string(kMaxIntBits) + " bits, got " +
                 std::to_string(bits));
  const int kind = is_signed ? HM_DTYPE_KIND_SINT : HM_DTYPE_KIND_UINT;
  return Dtype(HM_DTYPE_MAKE(kind, bits, 0, bits, 0));
}

Dtype Dtype::biased_integer(int bits) {
  HM_REQUIRE(bits >= 1 && bits <= kMaxIntBits, HM_ERROR_INVALID_ARGUMENT,
             "integer dtypes have 1.." + std::to_string(kMaxIntBits) + " bits, got " +
                 std::to_string(bits));
  return Dtype(HM_DTYPE_MAKE(HM_DTYPE_KIND_UINT_BIASED, bits, 0, bits, 0));
}

Dtype Dtype::floating(int exponent_bits, int mantissa_bits, FloatVariant variant) {
  const std::string problem = float_shape_problem(exponent_bits, mantissa_bits, variant);
  HM_REQUIRE(problem.empty(), HM_ERROR_INVALID_ARGUMENT, problem);
  if (exponent_bits == 8 && mantissa_bits == 23) return Dtype(HM_DTYPE_F32);
  const int bits = 1 + exponent_bits + mantissa_bits;
  return Dtype(HM_DTYPE_MAKE(HM_DTYPE_KIND_FLOAT, bits, exponent_bits, mantissa_bits,
                             static_cast<uint32_t>(variant)));
}

Dtype Dtype::floating(int exponent_bits, int mantissa_bits) {
  return floating(exponent_bits, mantissa_bits, default_variant(exponent_bits, mantissa_bits));
}

Dtype Dtype::unsigned_floating(int exponent_bits, int mantissa_bits) {
  HM_REQUIRE(exponent_bits == 8 && mantissa_bits == 0, HM_ERROR_INVALID_ARGUMENT,
             "the only unsigned float is ue8m0 (the MX scale), got ue" +
                 std::to_string(exponent_bits) + "m" + std::to_string(mantissa_bits));
  return Dtype(HM_DTYPE_UE8M0);
}

Dtype Dtype::from_code(hm_dtype_t code) {
  if (code == HM_DTYPE_NONE) return Dtype(code);
  const int bits = static_cast<int>(field(code, kBitsShift, 8));
  const int e = static_cast<int>(field(code, kExponentShift, 8));
  const int m = static_cast<int>(field(code, kMantissaShift, 8));
  const uint32_t kind = field(code, kKindShift, 4);
  const uint32_t variant = field(code, kVariantShift, 4);
  std::string problem;
  auto hex = [](hm_dtype_t c) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08x", static_cast<unsigned>(c));
    return std::string(buf);
  };
  if (kind == HM_DTYPE_KIND_SINT || kind == HM_DTYPE_KIND_UINT ||
      kind == HM_DTYPE_KIND_UINT_BIASED) {
    if (bits < 1 || bits > kMaxIntBits) problem = "integers have 1..8 bits";
    else if (e != 0 || m != bits || variant != 0)
      problem = "integers have 0 exponent bits, value bits == total bits and variant 0";
  } else if (kind == HM_DTYPE_KIND_FLOAT) {
    if (variant > HM_FLOAT_VARIANT_IEEE) problem = "unknown float variant " + std::to_string(variant);
    else if (bits != 1 + e + m) problem = "total bits must be 1 + exponent bits + mantissa bits";
    else problem = float_shape_problem(e, m, static_cast<FloatVariant>(variant));
  } else if (kind == HM_DTYPE_KIND_UFLOAT) {
    if (code != HM_DTYPE_UE8M0) problem = "the only unsigned float is ue8m0 (HM_DTYPE_UE8M0)";
  } else {
    problem = "unknown kind " + std::to_string(kind);
  }
  HM_REQUIRE(problem.empty(), HM_ERROR_INVALID_ARGUMENT,
             "dtype code " + hex(code) + " is not a valid dtype: " + problem +
                 " (build codes with hm_dtype_parse() or the HM_DTYPE_* constants)");
  return Dtype(code);
}

// ---------------------------------------------------------------------------------------------
// Fields

DtypeKind Dtype::kind() const { return static_cast<DtypeKind>(field(code_, kKindShift, 4)); }
int Dtype::bits() const { return static_cast<int>(field(code_, kBitsShift, 8)); }
int Dtype::exponent_bits() const { return static_cast<int>(field(code_, kExponentShift, 8)); }
int Dtype::mantissa_bits() const { return static_cast<int>(field(code_, kMantissaShift, 8)); }
FloatVariant Dtype::variant() const {
  return static_cast<FloatVariant>(field(code_, kVariantShift, 4));
}
bool Dtype::is_integer() const {
  const DtypeKind k = kind();
  return k == DtypeKind::kSignedInt || k == DtypeKind::kUnsignedInt ||
         k == DtypeKind::kBiasedUnsignedInt;
}
bool Dtype::is_float() const {
  return kind() == DtypeKind::kFloat || kind() == DtypeKind::kUnsignedFloat;
}
bool Dtype::is_signed() const {
  const DtypeKind k = kind();
  return k == DtypeKind::kSignedInt || k == DtypeKind::kBiasedUnsignedInt || k == DtypeKind::kFloat;
}
int Dtype::exponent_bias() const {
  if (!is_float()) return 0;
  const int e = exponent_bits();
  if (e == 0) return 1;  // e0m3: our convention, value = m / 8 (see docs/dtypes.md)
  return (1 << (e - 1)) - 1;
}
int Dtype::implicit_zero_point() const {
  return kind() == DtypeKind::kBiasedUnsignedInt ? 1 << (bits() - 1) : 0;
}

// ---------------------------------------------------------------------------------------------
// Names

std::string Dtype::name() const {
  if (is_none()) return "none";
  if (code_ == HM_DTYPE_F32) return "f32";
  if (code_ == HM_DTYPE_F16) return "f16";
  if (code_ == HM_DTYPE_BF16) return "bf16";
  if (code_ == HM_DTYPE_UE8M0) return "ue8m0";
  if (is_integer()) return int_name(kind(), bits());
  const int e = exponent_bits(), m = mantissa_bits();
  std::string text = "e" + std::to_string(e) + "m" + std::to_string(m);
  if (variant() != default_variant(e, m)) text += variant_suffix(variant());
  return text;
}

std::vector<Dtype> all_named_dtypes() {
  std::vector<Dtype> out;
  for (int bits = 1; bits <= kMaxIntBits; ++bits) {
    out.push_back(Dtype::integer(true, bits));
    out.push_back(Dtype::integer(false, bits));
    out.push_back(Dtype::biased_integer(bits));
  }
  out.push_back(Dtype::floating(0, 3));
  for (int e = 1; e <= 7; ++e) {
    for (int m = 0; e + m <= 7; ++m) {
      for (int v = HM_FLOAT_VARIANT_FINITE; v <= HM_FLOAT_VARIANT_IEEE; ++v) {
        if (float_shape_problem(e, m, static_cast<FloatVariant>(v)).empty())
          out.push_back(Dtype::floating(e, m, static_cast<FloatVariant>(v)));
      }
    }
  }
  out.push_back(Dtype::from_code(HM_DTYPE_UE8M0));
  out.push_back(Dtype::from_code(HM_DTYPE_F16));
  out.push_back(Dtype::from_code(HM_DTYPE_BF16));
  out.push_back(Dtype::from_code(HM_DTYPE_F32));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Decode / encode

namespace {

FloatShape float_shape(const Dtype& d) {
  FloatShape s;
  s.e = d.exponent_bits();
  s.m = d.mantissa_bits();
  s.bias = d.exponent_bias();
  s.variant = d.variant();
  s.has_sign = d.kind() == DtypeKind::kFloat;
  s.has_subnormals = d.kind() == DtypeKind::kFloat;
  if (d.kind() == DtypeKind::kUnsignedFloat) s.bias = 127;
  return s;
}

void require_valid_code(const Dtype& d, uint32_t code) {
  HM_REQUIRE(!d.is_none(), HM_ERROR_INVALID_ARGUMENT, "the dtype is 'none': it has no codes");
  const int bits = d.bits();
  HM_REQUIRE(bits >= 32 || code < (1u << bits), HM_ERROR_INVALID_ARGUMENT,
             "code " + std::to_string(code) + " does not fit the " + std::to_string(bits) +
                 " bits of " + d.name());
}

}  // namespace

bool Dtype::is_nan_code(uint32_t code) const {
  if (!is_float()) return false;
  const FloatShape s = float_shape(*this);
  const uint32_t magnitude = code & s.magnitude_mask();
  switch (s.variant) {
    case FloatVariant::kFinite:
      return false;
    case FloatVariant::kFn:
      return magnitude == s.magnitude_mask();
    default:
      return (magnitude >> s.m) == (1u << s.e) - 1u && (magnitude & ((1u << s.m) - 1u)) != 0;
  }
}

bool Dtype::is_inf_code(uint32_t code) const {
  if (!is_float() || variant() != FloatVariant::kIeee) return false;
  const FloatShape s = float_shape(*this);
  return (code & s.magnitude_mask()) == (((1u << s.e) - 1u) << s.m);
}

double Dtype::decode(uint32_t code) const {
  require_valid_code(*this, code);
  const int n = bits();
  switch (kind()) {
    case DtypeKind::kSignedInt:
      return static_cast<double>(static_cast<int32_t>(code) - ((code >> (n - 1)) & 1 ? (1 << n) : 0));
    case DtypeKind::kUnsignedInt:
      return static_cast<double>(code);
    case DtypeKind::kBiasedUnsignedInt:
      return static_cast<double>(static_cast<int32_t>(code) - (1 << (n - 1)));
    default:
      break;
  }
  if (is_nan_code(code)) return std::numeric_limits<double>::quiet_NaN();
  const FloatShape s = float_shape(*this);
  const bool negative = s.has_sign && ((code >> (s.e + s.m)) & 1u);
  double magnitude = is_inf_code(code) ? std::numeric_limits<double>::infinity()
                                       : s.magnitude_value(code & s.magnitude_mask());
  return negative ? -magnitude : magnitude;
}

double Dtype::max_value() const {
  HM_REQUIRE(!is_none(), HM_ERROR_INVALID_ARGUMENT, "the dtype is 'none': it has no values");
  const int n = bits();
  switch (kind()) {
    case DtypeKind::kSignedInt:
    case DtypeKind::kBiasedUnsignedInt:
      return static_cast<double>((1 << (n - 1)) - 1);
    case DtypeKind::kUnsignedInt:
      return static_cast<double>((1 << n) - 1);
    default: {
      const FloatShape s = float_shape(*this);
      return s.magnitude_value(s.max_magnitude());
    }
  }
}

double Dtype::min_value() const {
  HM_REQUIRE(!is_none(), HM_ERROR_INVALID_ARGUMENT, "the dtype is 'none': it has no values");
  switch (kind()) {
    case DtypeKind::kSignedInt:
    case DtypeKind::kBiasedUnsignedInt:
      return -static_cast<double>(1 << (bits() - 1));
    case DtypeKind::kUnsignedInt:
      return 0.0;
    case DtypeKind::kUnsignedFloat:
      return std::ldexp(1.0, -127);
    default:
      return -max_value();
  }
}

uint32_t Dtype::encode(double value) const {
  HM_REQUIRE(!is_none(), HM_ERROR_INVALID_ARGUMENT, "the dtype is 'none': it has no codes");
  if (std::isnan(value)) {
    HM_REQUIRE(is_float() && variant() != FloatVariant::kFinite, HM_ERROR_NON_FINITE,
               "NaN cannot be encoded in " + name() + ", which has no NaN code");
    const FloatShape s = float_shape(*this);
    // The positive quiet NaN: all-ones magnitude (FN), or all-ones exponent with the top
    // mantissa bit (IEEE), as numpy / ml_dtypes produce.
    if (s.variant == FloatVariant::kFn) return s.magnitude_mask();
    return (((1u << s.e) - 1u) << s.m) | (1u << (s.m - 1));
  }
  const int n = bits();
  if (is_integer()) {
    const double lo = min_value(), hi = max_value();
    // nearbyint rounds half to even in the default rounding mode; clamping saturates (and
    // handles +-Inf).
    const double r = value <= lo ? lo : value >= hi ? hi : std::nearbyint(value);
    const auto v = static_cast<int32_t>(r);
    if (kind() == DtypeKind::kBiasedUnsignedInt) return static_cast<uint32_t>(v + (1 << (n - 1)));
    return static_cast<uint32_t>(v) & ((1u << n) - 1u);  // two's complement in n bits
  }
  const FloatShape s = float_shape(*this);
  const bool negative = std::signbit(value);
  if (!s.has_sign) {
    HM_REQUIRE(!negative && value != 0.0, HM_ERROR_INVALID_ARGUMENT,
               "ue8m0 holds only positive powers of two; cannot encode " + std::to_string(value));
  }
  const uint32_t sign = negative ? 1u << (s.e + s.m) : 0u;
  const double a = std::fabs(value);
  if (std::isinf(a) && s.variant == FloatVariant::kIeee) return sign | (((1u << s.e) - 1u) << s.m);
  const uint32_t max_code = s.max_magnitude();
  if (a >= s.magnitude_value(max_code)) return sign | max_code;  // saturate (also +-Inf)
  if (!s.has_subnormals && a <= s.magnitude_value(0)) return 0;  // below ue8m0's smallest
  const uint32_t lo = s.floor_magnitude(a);
  const double lo_value = s.magnitude_value(lo), hi_value = s.magnitude_value(lo + 1);
  // The midpoint of two adjacent values of <= 24-bit significands is exact in a double.
  const double mid = 0.5 * (lo_value + hi_value);
  uint32_t magnitude;
  if (a < mid) magnitude = lo;
  else if (a > mid) magnitude = lo + 1;
  else magnitude = (lo & 1u) == 0 ? lo : lo + 1;  // tie: the even code
  return sign | magnitude;
}

// ---------------------------------------------------------------------------------------------
// Parsing

namespace {

std::string lower(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

bool all_digits(const std::string& s) {
  if (s.empty() || s.size() > 3) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

[[noreturn]] void parse_fail(const std::string& text, const std::string& why) {
  fail(HM_ERROR_PARSE,
       "cannot parse dtype " + core::quoted(text) + (why.empty() ? "" : ": " + why) +
           ". Accepted: f16, bf16, f32; intN, uintN (N = 1..8); uintNbB with B = 2^(N-1) "
           "(uint4b8, uint8b128, ...); eXmY with X >= 1, X + Y <= 7 (e2m1, e4m3, e5m2, e3m2, "
           "e2m3, ...), with suffix fn / ieee / finite for 8-bit variants; e0m3; ue8m0; none; "
           "aliases fp16, half, float16, bfloat16, fp32, float, float32, fp8, fp8_e4m3, "
           "fp8_e5m2, fp6, fp4, mxfp4, nvfp4, e8m0, the ml_dtypes names (float8_e4m3fn, "
           "float8_e5m2, float8_e4m3, float8_e3m4, float4_e2m1fn, float6_e2m3fn, float6_e3m2fn, "
           "float8_e8m0fnu) and floatNeXmY (float8e4m3, float4e2m1, float4e0m3, float8e8m0); "
           "case-insensitive");
}

struct Alias {
  const char* name;
  hm_dtype_t code;
};

// Fixed aliases. ml_dtypes names keep ml_dtypes' meaning: "fn" there means "no Inf", so
// float4_e2m1fn is our (finite) e2m1, while float8_e4m3 / float8_e3m4 have Inf (our IEEE variant).
const Alias kAliases[] = {
    {"fp16", HM_DTYPE_F16},
    {"half", HM_DTYPE_F16},
    {"float16", HM_DTYPE_F16},
    {"bfloat16", HM_DTYPE_BF16},
    {"fp32", HM_DTYPE_F32},
    {"float", HM_DTYPE_F32},
    {"float32", HM_DTYPE_F32},
    {"fp8", HM_DTYPE_E4M3},
    {"fp8_e4m3", HM_DTYPE_E4M3},
    {"fp8_e4m3fn", HM_DTYPE_E4M3},
    {"float8_e4m3fn", HM_DTYPE_E4M3},
    {"fp8_e5m2", HM_DTYPE_E5M2},
    {"float8_e5m2", HM_DTYPE_E5M2},
    {"float8_e4m3", HM_DTYPE_MAKE(HM_DTYPE_KIND_FLOAT, 8, 4, 3, HM_FLOAT_VARIANT_IEEE)},
    {"float8_e3m4", HM_DTYPE_MAKE(HM_DTYPE_KIND_FLOAT, 8, 3, 4, HM_FLOAT_VARIANT_IEEE)},
    {"fp4", HM_DTYPE_E2M1},
    {"mxfp4", HM_DTYPE_E2M1},
    {"nvfp4", HM_DTYPE_E2M1},
    {"float4_e2m1fn", HM_DTYPE_E2M1},
    {"fp6", HM_DTYPE_MAKE(HM_DTYPE_KIND_FLOAT, 6, 2, 3, HM_FLOAT_VARIANT_FINITE)},
    {"float6_e2m3fn", HM_DTYPE_MAKE(HM_DTYPE_KIND_FLOAT, 6, 2, 3, HM_FLOAT_VARIANT_FINITE)},
    {"float6_e3m2fn", HM_DTYPE_MAKE(HM_DTYPE_KIND_FLOAT, 6, 3, 2, HM_FLOAT_VARIANT_FINITE)},
    {"float8_e8m0fnu", HM_DTYPE_UE8M0},
    {"e8m0", HM_DTYPE_UE8M0},
};

// "eXmY[suffix]" (after any "floatN" prefix). Returns false when the text has another shape.
bool parse_float_shape(const std::string& text, const std::string& s, int total_bits, Dtype* out) {
  if (s.size() < 4 || (s[0] != 'e' && s.compare(0, 2, "ue") != 0)) return false;
  const bool is_unsigned = s[0] == 'u';
  size_t i = is_unsigned ? 2 : 1;
  size_t j = i;
  while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
  if (j == i || j >= s.size() || s[j] != 'm') return false;
  size_t k = j + 1;
  while (k < s.size() && s[k] >= '0' && s[k] <= '9') ++k;
  if (k == j + 1) return false;
  const std::string es = s.substr(i, j - i), ms = s.substr(j + 1, k - j - 1);
  if (!all_digits(es) || !all_digits(ms)) parse_fail(text, "exponent or mantissa width too long");
  const int e = std::stoi(es), m = std::stoi(ms);
  const std::string suffix = s.substr(k);
  // A floatN prefix states the width: N = 1 + X + Y for signed, X + Y for unsigned (float8e8m0).
  const bool prefix_unsigned = total_bits > 0 && total_bits == e + m;
  if (total_bits > 0 && total_bits != 1 + e + m && !prefix_unsigned)
    parse_fail(text, "the width " + std::to_string(total_bits) + " is neither 1 + " +
                         std::to_string(e) + " + " + std::to_string(m) + " (signed) nor " +
                         std::to_string(e) + " + " + std::to_string(m) + " (unsigned)");
  if (is_unsigned || prefix_unsigned) {
    if (!(e == 8 && m == 0) || !suffix.empty())
      parse_fail(text, "the only unsigned float is ue8m0");
    *out = Dtype::from_code(HM_DTYPE_UE8M0);
    return true;
  }
  FloatVariant variant;
  if (suffix.empty()) {
    variant = default_variant(e, m);
  } else if (suffix == "ieee") {
    variant = FloatVariant::kIeee;
  } else if (suffix == "finite") {
    variant = FloatVariant::kFinite;
  } else if (suffix == "fn") {
    // "fn" = no Inf (OCP / ml_dtypes). At 8 bits that is the variant whose all-ones magnitude is
    // NaN; narrower floats have no NaN either, so it names their only (finite) variant.
    variant = 1 + e + m < kMaxSmallFloatBits ? FloatVariant::kFinite : FloatVariant::kFn;
  } else if (suffix == "fnuz" || suffix == "fnu" || suffix.find("fnuz") != std::string::npos) {
    parse_fail(text, "the fnuz float variants (NaN at -0, shifted bias) are not supported");
  } else {
    parse_fail(text, "unknown float suffix '" + suffix + "' (use fn, ieee or finite)");
  }
  const std::string problem = float_shape_problem(e, m, variant);
  if (!problem.empty()) parse_fail(text, problem);
  *out = Dtype::floating(e, m, variant);
  return true;
}

// "intN", "uintN", "uintNbB". Returns false when the text has another shape.
bool parse_integer(const std::string& text, const std::string& s, Dtype* out) {
  bool is_unsigned;
  size_t i;
  if (s.compare(0, 3, "int") == 0) {
    is_unsigned = false;
    i = 3;
  } else if (s.compare(0, 4, "uint") == 0) {
    is_unsigned = true;
    i = 4;
  } else {
    return false;
  }
  size_t j = i;
  while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
  if (j == i) return false;
  const std::string bs = s.substr(i, j - i);
  if (!all_digits(bs)) parse_fail(text, "integers have 1..8 bits");
  const int bits = std::stoi(bs);
  if (bits < 1 || bits > kMaxIntBits)
    parse_fail(text, "integers have 1..8 bits" +
                         std::string(bits == 16 || bits == 32 ? " (int16/int32 are not dtypes here)" : ""));
  if (j == s.size()) {
    *out = Dtype::integer(!is_unsigned, bits);
    return true;
  }
  if (s[j] != 'b') return false;
  const std::string bias = s.substr(j + 1);
  const std::string expected = std::to_string(1 << (bits - 1));
  if (!is_unsigned || bias.empty() || !all_digits(bias) || bias != expected)
    parse_fail(text, "a biased integer is uintNbB with B = 2^(N-1), here uint" + bs + "b" + expected);
  *out = Dtype::biased_integer(bits);
  return true;
}

}  // namespace

Dtype Dtype::parse(const std::string& name) {
  const std::string s = lower(name);
  if (s.empty()) parse_fail(name, "the name is empty");
  if (s == "none") return Dtype();
  if (s == "f16") return Dtype(HM_DTYPE_F16);
  if (s == "bf16") return Dtype(HM_DTYPE_BF16);
  if (s == "f32") return Dtype(HM_DTYPE_F32);
  for (const Alias& alias : kAliases)
    if (s == alias.name) return Dtype(alias.code);
  Dtype out;
  if (parse_integer(name, s, &out)) return out;
  if (parse_float_shape(name, s, 0, &out)) return out;
  // floatNeXmY (Humming's spelling); ml_dtypes' floatN_eXmY* is matched above or rejected here.
  if (s.compare(0, 5, "float") == 0) {
    size_t j = 5;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    if (j > 5 && all_digits(s.substr(5, j - 5))) {
      // The width is a plain positive number: "float08_e4m3" would miss the float8_e4m3 alias
      // (the IEEE variant, with infinities) and parse as the finite e4m3; "float0" would read as
      // "no width stated".
      if (s[5] == '0')
        parse_fail(name, "the width after 'float' must be a positive number without leading zeros");
      size_t start = j;
      if (start < s.size() && s[start] == '_') {
        const std::string rest = s.substr(start + 1);
        if (rest.find("fnuz") != std::string::npos || rest.find("b11") != std::string::npos)
          parse_fail(name, "the fnuz float variants (NaN at -0, shifted bias) are not supported");
        if (rest == "e5m3fnu") parse_fail(name, "the only unsigned float is ue8m0");
        ++start;
      }
      if (parse_float_shape(name, s.substr(start), std::stoi(s.substr(5, j - 5)), &out)) return out;
    }
  }
  parse_fail(name, "");
}

}  // namespace hm::core
