// The host quantization reference: a float weight [E][N][K] -> canonical buffers (one code per
// byte, float scales exactly representable in the scale dtype, zero points, global scales) and
// back. The rules (how each scale is chosen, rounding, saturation) are in docs/dtypes.md; GPU
// converters and kernels are checked against this file.
#pragma once

#include <cstdint>

#include "core/format.hpp"

namespace hm::quant {

// Dimensions and element counts of the canonical buffers of a format (include/humming.h):
//   codes        [E][N][K]
//   scales       [E][scale_rows][groups_k]   (none for kNone / kTensor)
//   zero_points  like scales, only with zero points
//   global_scale [E], only for kTensor / kGroupTensor
struct CanonicalShape {
  int64_t experts = 0, n = 0, k = 0;
  int64_t group_k = 0;     // K columns per scale group (k itself for channel / tensor / none)
  int64_t groups_k = 0;    // ceil(k / group_k): the last group may be partial
  int64_t group_n = 1;     // rows per scale row (block scales; 1 otherwise)
  int64_t scale_rows = 0;  // ceil(n / group_n)
  uint64_t codes = 0, scales = 0, zero_points = 0, global_scale = 0;
};

// Checks what the quantizer needs from a format (shape > 0, group sizes, dtypes that fit the
// canonical buffers) and returns the shape; throws hm::Error(HM_ERROR_INVALID_ARGUMENT /
// HM_ERROR_UNSUPPORTED_FORMAT) naming the field otherwise.
CanonicalShape canonical_shape(const core::Format& format);

// Caller-owned canonical buffers (pointers unused by the format may be null).
struct CanonicalWeight {
  uint8_t* codes = nullptr;
  float* scales = nullptr;
  float* zero_points = nullptr;
  float* global_scale = nullptr;
};
struct ConstCanonicalWeight {
  const uint8_t* codes = nullptr;
  const float* scales = nullptr;
  const float* zero_points = nullptr;
  const float* global_scale = nullptr;
  ConstCanonicalWeight() = default;
  ConstCanonicalWeight(const CanonicalWeight& w)  // NOLINT: a view of mutable buffers
      : codes(w.codes), scales(w.scales), zero_points(w.zero_points), global_scale(w.global_scale) {}
};

// Quantizes weight [E][N][K] (row-major f32). Non-finite weights fail with HM_ERROR_NON_FINITE
// naming (expert, row, column). Missing buffers the format needs fail with
// HM_ERROR_INVALID_ARGUMENT. Deterministic; uses several threads for big weights.
void quantize(const core::Format& format, const float* weight, const CanonicalWeight& out);

// The exact inverse mapping: weight[e][n][k] = float((value(code) - zp) * scale * global), the
// product formed in double.
void dequantize(const core::Format& format, const ConstCanonicalWeight& in, float* weight);

// The effective scale multiplier (scale * global) and the zero point that dequantize applies to
// element (e, n, k); for tests and converters that check one element at a time.
struct ElementScale {
  double scale = 1.0;
  double zero_point = 0.0;
};
ElementScale element_scale(const CanonicalShape& shape, const ConstCanonicalWeight& in, int64_t e,
                           int64_t n, int64_t k);

}  // namespace hm::quant
