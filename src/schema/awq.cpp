// AWQ (AutoAWQ GEMM packing, quant_method "awq"), 4-bit:
//   qweight int32 [K, N/8]   word w of row k holds columns 8w..8w+7, nibble j (bits 4j..4j+3)
//                            holding column 8w + kOrder[j]
//   qzeros  int32 [G, N/8]   the same packing, real zero points (no offset)
//   scales  f16   [G, N]
//   bias    [N]              optional
// w[n][k] = (q - zero[g][n]) * scale[g][n], g = k / group_size.
#include <cstring>

#include "core/error.hpp"
#include "schema/common.hpp"

namespace hm::schema {

namespace {

// Nibble j of a word holds column kOrder[j] of its 8 columns.
constexpr int kOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// One row of 8-column words -> the N values of that row, in column order.
inline void unpack_row(const uint8_t* words, int64_t n, uint8_t* out) {
  for (int64_t w = 0; w < n / 8; ++w) {
    uint32_t v;
    std::memcpy(&v, words + 4 * w, 4);
    for (int j = 0; j < 8; ++j) out[8 * w + kOrder[j]] = static_cast<uint8_t>((v >> (4 * j)) & 15u);
  }
}

}  // namespace

Layer convert_awq(const LayerTensors& t, const Options& options) {
  const io::TensorView& qweight = t.require("qweight");
  const io::TensorView& qzeros = t.require("qzeros");
  const io::TensorView& scales = t.require("scales");
  expect_dtype(qweight, {"I32", "U32"});
  expect_ndim(qweight, 2);
  expect_dtype(qzeros, {"I32", "U32"});
  expect_dtype(scales, {"F16", "BF16", "F32"});
  expect_ndim(scales, 2);
  if (options.bits != 0 && options.bits != 4)
    bad_tensor(qweight,
               "AWQ GEMM packing is 4-bit; bits " + std::to_string(options.bits) + " was asked",
               HM_ERROR_UNSUPPORTED);
  const int64_t k = qweight.shape[0];
  const int64_t n = qweight.shape[1] * 8;
  if (n <= 0 || k <= 0) bad_tensor(qweight, "is empty");
  const int64_t groups = scales.shape[0];
  expect_shape(scales, {groups, n});
  expect_shape(qzeros, {groups, n / 8});
  const int64_t group_k = derive_group(options, k, groups, scales);

  IntegerParts parts;
  parts.bits = 4;
  parts.n = n;
  parts.k = k;
  parts.group_k = group_k;
  parts.scale_dtype = float_dtype_of(scales);
  parts.scale_tensor = &scales;
  parts.codes.resize(static_cast<size_t>(n * k));
  // Rows of qweight are rows of K: unpack a block of 16 rows, then write each column's 16 codes.
  constexpr int64_t kBlock = 16;
  uint8_t* codes = parts.codes.data();
  parallel_for((k + kBlock - 1) / kBlock, kBlock * n, [&](int64_t b0, int64_t b1) {
    std::vector<uint8_t> rows(static_cast<size_t>(kBlock * n));
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t k0 = b * kBlock, k1 = std::min(k, k0 + kBlock);
      for (int64_t r = k0; r < k1; ++r)
        unpack_row(qweight.data + r * (n / 8) * 4, n, &rows[(r - k0) * n]);
      for (int64_t c = 0; c < n; ++c)
        for (int64_t r = k0; r < k1; ++r) codes[c * k + r] = rows[(r - k0) * n + c];
    }
  });

  const std::vector<float> s = read_scales(scales);
  parts.scales.resize(static_cast<size_t>(n * groups));
  parts.zero_points.resize(static_cast<size_t>(n * groups));
  std::vector<uint8_t> zrow(static_cast<size_t>(n));
  for (int64_t g = 0; g < groups; ++g) {
    unpack_row(qzeros.data + g * (n / 8) * 4, n, zrow.data());
    for (int64_t c = 0; c < n; ++c) {
      parts.scales[c * groups + g] = s[g * n + c];
      parts.zero_points[c * groups + g] = zrow[c];
    }
  }
  Layer layer =
      integer_layer(std::move(parts), options, preferred_16bit({&scales, t.find("bias")}), qzeros);
  set_bias(layer, t.find("bias"), 1, n);
  return layer;
}

}  // namespace hm::schema
