#include "quant/activation.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/error.hpp"
#include "quant/code_table.hpp"

namespace hm::quant {
namespace {

void check_dtype(core::Dtype dtype) {
  const bool ok = !dtype.is_none() && (dtype.bits() == 8 || dtype.bits() == 4) &&
                  (dtype.kind() == core::DtypeKind::kFloat ||
                   dtype.kind() == core::DtypeKind::kSignedInt);
  HM_REQUIRE(ok, HM_ERROR_UNSUPPORTED_FORMAT,
             "activation dtype " + dtype.name() +
                 " cannot be quantized: use a signed float or signed integer of 8 or 4 bits "
                 "(e4m3, e5m2, int8, int4, e2m1)");
}

void check_shape(const void* a, const void* codes, const float* scales, int64_t m, int64_t k,
                 int64_t group_k) {
  HM_REQUIRE(m >= 0 && k >= 0, HM_ERROR_INVALID_ARGUMENT,
             "m and k must be >= 0, got m=" + std::to_string(m) + " k=" + std::to_string(k));
  HM_REQUIRE(group_k >= 0, HM_ERROR_INVALID_ARGUMENT,
             "group_k must be 0 (per token) or positive, got " + std::to_string(group_k));
  if (m * k == 0) return;
  HM_REQUIRE(a != nullptr && codes != nullptr && scales != nullptr, HM_ERROR_INVALID_ARGUMENT,
             "a buffer argument is NULL");
}

void put_code(uint8_t* row, int bits, int64_t j, uint32_t code) {
  if (bits == 8) {
    row[j] = static_cast<uint8_t>(code);
  } else {
    uint8_t& byte = row[j / 2];
    byte = (j % 2 == 0) ? static_cast<uint8_t>((byte & 0xF0u) | code)
                        : static_cast<uint8_t>((byte & 0x0Fu) | (code << 4));
  }
}

uint32_t get_code(const uint8_t* row, int bits, int64_t j) {
  if (bits == 8) return row[j];
  return (j % 2 == 0) ? row[j / 2] & 0x0Fu : row[j / 2] >> 4;
}

// The rows of codes and scales, the same for quantize and dequantize.
struct RowLayout {
  int bits = 0;
  int64_t row_bytes = 0;  // bytes of one row of codes
  int64_t groups = 0;     // scales per row
  int64_t group_k = 0;    // columns per scale: k for per-token scales
};

// Checks the arguments both directions take (`floats`: the input a or the output) and lays out
// their rows.
RowLayout checked_row_layout(core::Dtype dtype, const float* floats, const uint8_t* codes,
                             const float* scales, int64_t m, int64_t k, int64_t group_k) {
  check_dtype(dtype);
  check_shape(floats, codes, scales, m, k, group_k);
  RowLayout l;
  l.bits = dtype.bits();
  l.row_bytes = activation_row_bytes(dtype, k);
  l.groups = activation_groups(k, group_k);
  l.group_k = group_k > 0 ? group_k : k;
  return l;
}

}  // namespace

int64_t activation_row_bytes(core::Dtype dtype, int64_t k) {
  check_dtype(dtype);
  return (k * dtype.bits() + 7) / 8;
}

int64_t activation_groups(int64_t k, int64_t group_k) {
  if (group_k <= 0) return 1;
  return (k + group_k - 1) / group_k;
}

void quantize_activation(core::Dtype dtype, const float* a, int64_t m, int64_t k, int64_t group_k,
                         uint8_t* codes, float* scales) {
  const RowLayout l = checked_row_layout(dtype, a, codes, scales, m, k, group_k);
  const CodeTable table(dtype);
  for (int64_t i = 0; i < m; ++i) {
    const float* in = a + i * k;
    uint8_t* row = codes + i * l.row_bytes;
    std::fill(row, row + l.row_bytes, uint8_t{0});  // the pad nibble of an odd k is 0
    for (int64_t g = 0; g < l.groups; ++g) {
      const int64_t c0 = g * l.group_k, c1 = std::min(k, c0 + l.group_k);
      // absmax, and whether the group holds a NaN or an infinity.
      float absmax = 0.0f;
      bool finite = true;
      for (int64_t j = c0; j < c1; ++j) {
        finite = finite && std::isfinite(in[j]);
        absmax = std::max(absmax, std::fabs(in[j]));
      }
      if (!finite) {  // a NaN scale and zero codes: NaN in every dequantized element
        scales[i * l.groups + g] = std::numeric_limits<float>::quiet_NaN();
        continue;  // the row's codes are already 0
      }
      // Both divisions are IEEE f32 divisions rounded to nearest (the GPU quantizer's rule,
      // kernels/humming/quant/activation.h); the code is the nearest to the f32 quotient.
      float scale = absmax / static_cast<float>(table.max_value());
      if (!(scale > 0.0f)) scale = 1.0f;  // zeros (or an f32 underflow): codes come out 0
      scales[i * l.groups + g] = scale;
      for (int64_t j = c0; j < c1; ++j)
        put_code(row, l.bits, j, table.encode(static_cast<double>(in[j] / scale)));
    }
  }
}

void dequantize_activation(core::Dtype dtype, const uint8_t* codes, const float* scales, int64_t m,
                           int64_t k, int64_t group_k, float* out) {
  const RowLayout l = checked_row_layout(dtype, out, codes, scales, m, k, group_k);
  const CodeTable table(dtype);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      const double scale = scales[i * l.groups + j / l.group_k];
      const uint32_t code = get_code(codes + i * l.row_bytes, l.bits, j);
      out[i * k + j] = static_cast<float>(static_cast<double>(table.decode(code)) * scale);
    }
  }
}

}  // namespace hm::quant
