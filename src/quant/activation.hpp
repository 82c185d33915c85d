// The host reference for dynamic activation quantization (what the GPU activation-quant kernel
// reproduces bit for bit): per token, or per token x K-group, scale = absmax / (largest value of
// the dtype) and q = a / scale, both IEEE f32 divisions rounded to nearest even, and code = the
// code nearest to q, ties to even, saturating.
//   e4m3: absmax / 448   e5m2: absmax / 57344   e2m1: absmax / 6   int8: absmax / 127
//   int4: absmax / 7
// A row (or group) of zeros gets scale 1 and zero codes; one holding a NaN or an infinity gets a
// NaN scale (quiet, 0x7FC00000) and zero codes. 8-bit codes take a byte each; 4-bit
// codes are packed two per byte, even k in the low nibble, each row starting on a new byte.
#pragma once

#include <cstdint>

#include "core/dtype.hpp"

namespace hm::quant {

// Bytes of one quantized row of k elements.
int64_t activation_row_bytes(core::Dtype dtype, int64_t k);
// Scale groups per row: 1 for per-token scales (group_k == 0), else ceil(k / group_k).
int64_t activation_groups(int64_t k, int64_t group_k);

// a [m][k] f32 -> codes [m][activation_row_bytes], scales [m][activation_groups] f32.
// dtype: a signed float or signed integer of 8 or 4 bits (e4m3, e5m2, int8, int4, e2m1, ...).
void quantize_activation(core::Dtype dtype, const float* a, int64_t m, int64_t k, int64_t group_k,
                         uint8_t* codes, float* scales);
// The inverse: out[i][j] = float(value(code) * scale).
void dequantize_activation(core::Dtype dtype, const uint8_t* codes, const float* scales, int64_t m,
                           int64_t k, int64_t group_k, float* out);

}  // namespace hm::quant
