// A precomputed codec for one dtype of at most 8 bits, for the quantizer's inner loops: decode is
// a table lookup; encode is arithmetic (integers, and signed floats by rounding the double's own
// bits) or a binary search over the midpoints between adjacent magnitudes (ue8m0). It gives exactly core::Dtype::encode's answer for every finite
// input (tests/host/test_dtype_table.cpp checks this densely), without its per-call validation.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/dtype.hpp"

namespace hm::quant {

class CodeTable {
 public:
  // Throws hm::Error(HM_ERROR_INVALID_ARGUMENT) for dtypes wider than 8 bits.
  explicit CodeTable(core::Dtype dtype);

  core::Dtype dtype() const { return dtype_; }
  // Exact value of a code (every value of a <= 8-bit dtype is a float). NaN for NaN codes.
  float decode(uint32_t code) const { return values_[code]; }
  // Round to nearest, ties to the even code, saturating; x must be finite (and > 0 for ue8m0).
  uint32_t encode(double x) const {
    if (is_integer_) return encode_integer(x);
    const uint32_t sign = std::signbit(x) ? sign_bit_ : 0u;
    const double a = std::fabs(x);
    return sign | (arithmetic_ ? encode_magnitude_bits(a) : encode_magnitude(a));
  }
  // Integer dtypes: the code of an integer value in [min_value, max_value].
  uint32_t code_of_integer(int32_t v) const {
    return static_cast<uint32_t>(v + integer_offset_) & code_mask_;
  }
  uint32_t code_mask() const { return code_mask_; }
  int32_t implicit_zero_point() const { return integer_offset_; }
  double min_value() const { return min_value_; }
  double max_value() const { return max_value_; }

 private:
  uint32_t encode_integer(double x) const {
    const double clamped = x < min_value_ ? min_value_ : x > max_value_ ? max_value_ : x;
    return code_of_integer(static_cast<int32_t>(std::nearbyint(clamped)));
  }
  uint32_t encode_magnitude(double a) const;  // the binary search

  // Signed floats: both candidate roundings are computed and one is selected, so random data
  // costs no branch mispredictions.
  uint32_t encode_magnitude_bits(double a) const {
    // Subnormal codes are multiples of the smallest subnormal: scale exactly (a power of two) and
    // round half to even by adding 1.5 * 2^52, which leaves no fraction bits.
    constexpr double kMagic = 6755399441055744.0;
    const double scaled = std::min(a, min_normal_) * subnormal_factor_;
    const auto subnormal = static_cast<uint32_t>((scaled + kMagic) - kMagic);
    // A normal double is [exponent | 52-bit mantissa]; dropping 52 - m mantissa bits with round
    // half to even gives [exponent | m-bit mantissa], a carry moving into the next binade. The
    // even-ness that matters is the dtype code's, whose low bit differs from the shifted value's
    // only when m == 0 and the rebias is odd.
    uint64_t u;
    std::memcpy(&u, &a, sizeof u);
    const int shift = 52 - mantissa_bits_;
    const uint64_t code_lsb = ((u >> shift) - exponent_rebias_) & 1u;
    u += (uint64_t{1} << (shift - 1)) - 1u + code_lsb;
    const auto normal = static_cast<uint32_t>((u >> shift) - exponent_rebias_);
    const uint32_t rounded = a < min_normal_ ? subnormal : normal;
    return a >= max_magnitude_ ? max_magnitude_code_ : rounded;  // saturate
  }

  core::Dtype dtype_;
  bool is_integer_ = false;
  uint32_t sign_bit_ = 0;         // signed floats: the sign bit of a code
  uint32_t code_mask_ = 0;        // (1 << bits) - 1
  int32_t integer_offset_ = 0;    // biased integers: 2^(bits-1)
  double min_value_ = 0, max_value_ = 0;
  std::vector<float> values_;     // [1 << bits]
  // Floats: magnitudes_[c] for magnitude codes c = 0..max; midpoints_[c] between c and c+1.
  std::vector<double> magnitudes_;
  std::vector<double> midpoints_;
  // Floats with subnormals (all signed floats): the arithmetic path's constants.
  bool arithmetic_ = false;
  int mantissa_bits_ = 0;
  uint32_t max_magnitude_code_ = 0;
  double max_magnitude_ = 0;
  double min_normal_ = 0;        // 2^(1 - bias)
  double subnormal_factor_ = 0;  // 2^(bias - 1 + m): a subnormal's code is a * this
  uint64_t exponent_rebias_ = 0;  // (1023 - bias) << m: double exponent -> dtype exponent
};

}  // namespace hm::quant
