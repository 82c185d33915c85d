#include "quant/code_table.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"

namespace hm::quant {

CodeTable::CodeTable(core::Dtype dtype) : dtype_(dtype) {
  HM_REQUIRE(!dtype.is_none() && dtype.bits() <= 8, HM_ERROR_INVALID_ARGUMENT,
             "a code table needs a dtype of at most 8 bits, got " + dtype.name());
  const int bits = dtype.bits();
  code_mask_ = (1u << bits) - 1u;
  is_integer_ = dtype.is_integer();
  integer_offset_ = dtype.implicit_zero_point();
  min_value_ = dtype.min_value();
  max_value_ = dtype.max_value();
  values_.resize(size_t{1} << bits);
  for (uint32_t c = 0; c <= code_mask_; ++c) values_[c] = static_cast<float>(dtype.decode(c));
  if (is_integer_) return;
  // Magnitude codes are ordered like their values, so code c's neighbours are c - 1 and c + 1.
  const bool has_sign = dtype.kind() == core::DtypeKind::kFloat;
  sign_bit_ = has_sign ? 1u << (bits - 1) : 0u;
  const uint32_t max_code = dtype.encode(max_value_);
  for (uint32_t c = 0; c <= max_code; ++c) magnitudes_.push_back(dtype.decode(c));
  for (uint32_t c = 0; c < max_code; ++c)
    midpoints_.push_back(0.5 * (magnitudes_[c] + magnitudes_[c + 1]));
  arithmetic_ = has_sign;  // ue8m0 has no subnormals: it keeps the search
  mantissa_bits_ = dtype.mantissa_bits();
  max_magnitude_code_ = max_code;
  max_magnitude_ = magnitudes_[max_code];
  const int bias = dtype.exponent_bias();
  min_normal_ = std::ldexp(1.0, 1 - bias);
  subnormal_factor_ = std::ldexp(1.0, bias - 1 + mantissa_bits_);
  exponent_rebias_ = static_cast<uint64_t>(1023 - bias) << mantissa_bits_;
}

uint32_t CodeTable::encode_magnitude(double a) const {
  // Index of the first midpoint >= a: every midpoint below a moves the answer up one code.
  const auto it = std::lower_bound(midpoints_.begin(), midpoints_.end(), a);
  auto c = static_cast<uint32_t>(it - midpoints_.begin());
  if (it != midpoints_.end() && *it == a && (c & 1u)) ++c;  // a tie goes to the even code
  return c;
}

}  // namespace hm::quant
