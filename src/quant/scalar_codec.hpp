// Exact conversion of one float to and from the code of a scale or zero-point dtype (<= 8-bit
// dtypes, f16, bf16, f32). Packing stores these codes; a value that the dtype cannot hold exactly
// is reported rather than rounded, because the canonical buffers promise exact values.
#pragma once

#include <cstdint>
#include <memory>

#include "core/dtype.hpp"

namespace hm::quant {

class CodeTable;

class ScalarCodec {
 public:
  enum Status { kExact, kNotRepresentable, kNonFinite };

  // Throws hm::Error(HM_ERROR_UNSUPPORTED_FORMAT) for dtypes of other widths.
  explicit ScalarCodec(core::Dtype dtype);
  ~ScalarCodec();

  // The code whose value is exactly x (kExact), or why there is none. -0.0 keeps its sign where
  // the dtype has one.
  Status encode_exact(float x, uint32_t* code) const;
  // The value of a code (NaN codes give NaN).
  float decode(uint32_t code) const;

 private:
  enum class Kind { kF32, kF16, kBf16, kTable };
  Kind kind_;
  std::unique_ptr<CodeTable> table_;
};

// IEEE half <-> float, exact; half_from_float_exact is false when x has no exact f16 value.
bool half_from_float_exact(float x, uint16_t* half);
float float_from_half(uint16_t half);

}  // namespace hm::quant
