// Number formats: one descriptor for every dtype the library speaks (integers INT1-INT8 signed,
// unsigned and with an implicit zero point; signed floats eXmY; unsigned scale floats; f16, bf16,
// f32). The 32-bit code is the ABI's hm_dtype_t (layout documented in include/humming.h); this
// class is its C++ face: parsing, naming, exact decode and round-to-nearest-even encode.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "humming.h"

namespace hm::core {

enum class DtypeKind : uint8_t {
  kNone = 0,
  kSignedInt = HM_DTYPE_KIND_SINT,
  kUnsignedInt = HM_DTYPE_KIND_UINT,
  kBiasedUnsignedInt = HM_DTYPE_KIND_UINT_BIASED,  // code - 2^(bits-1), "uint4b8"
  kFloat = HM_DTYPE_KIND_FLOAT,
  kUnsignedFloat = HM_DTYPE_KIND_UFLOAT,
};

enum class FloatVariant : uint8_t {
  kFinite = HM_FLOAT_VARIANT_FINITE,  // every code is a finite number
  kFn = HM_FLOAT_VARIANT_FN,          // only all-ones magnitude is NaN, no Inf
  kIeee = HM_FLOAT_VARIANT_IEEE,      // all-ones exponent: Inf (mantissa 0) and NaN
};

class Dtype {
 public:
  constexpr Dtype() = default;
  // Wraps a code; throws hm::Error(HM_ERROR_INVALID_ARGUMENT) when the code is not a valid dtype.
  static Dtype from_code(hm_dtype_t code);
  // Parses canonical names and aliases; throws hm::Error(HM_ERROR_PARSE) naming the text.
  static Dtype parse(const std::string& name);
  // Constructors that validate their arguments (throw HM_ERROR_INVALID_ARGUMENT).
  static Dtype integer(bool is_signed, int bits);
  static Dtype biased_integer(int bits);  // implicit zero point 2^(bits-1)
  static Dtype floating(int exponent_bits, int mantissa_bits, FloatVariant variant);
  static Dtype floating(int exponent_bits, int mantissa_bits);  // the default variant for eXmY
  static Dtype unsigned_floating(int exponent_bits, int mantissa_bits);  // ue8m0

  hm_dtype_t code() const { return code_; }
  bool is_none() const { return code_ == 0; }
  DtypeKind kind() const;
  int bits() const;
  int exponent_bits() const;
  int mantissa_bits() const;
  FloatVariant variant() const;
  bool is_integer() const;  // any of the three integer kinds
  bool is_float() const;    // signed or unsigned float
  bool is_signed() const;   // can represent negative values (biased ints: yes)
  int exponent_bias() const;  // floats: 2^(e-1) - 1 (ue8m0: 127); ints: 0
  int implicit_zero_point() const;  // biased ints: 2^(bits-1); others 0

  std::string name() const;  // canonical; parse(name()) == *this

  // Exact value of a code (dtypes of <= 16 bits; f32 too). NaN codes give NaN, Inf codes Inf.
  double decode(uint32_t code) const;
  // Round-to-nearest-even, saturating to the largest finite magnitude. NaN maps to the NaN code;
  // for a dtype without NaN, throws hm::Error(HM_ERROR_NON_FINITE). +-Inf gives the Inf code of
  // IEEE dtypes and saturates elsewhere; -0 keeps its sign in signed floats; ue8m0 rejects
  // values <= 0 (HM_ERROR_INVALID_ARGUMENT). docs/dtypes.md has the whole contract.
  uint32_t encode(double value) const;
  // Largest / smallest (most negative) finite value.
  double max_value() const;
  double min_value() const;
  bool is_nan_code(uint32_t code) const;
  bool is_inf_code(uint32_t code) const;

  friend bool operator==(Dtype a, Dtype b) { return a.code_ == b.code_; }
  friend bool operator!=(Dtype a, Dtype b) { return a.code_ != b.code_; }

 private:
  constexpr explicit Dtype(hm_dtype_t code) : code_(code) {}
  hm_dtype_t code_ = 0;
};

// Every dtype the library knows by a canonical name, for tests and `humming support`.
std::vector<Dtype> all_named_dtypes();

}  // namespace hm::core
