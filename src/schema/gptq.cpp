// GPTQ (AutoGPTQ / GPTQModel, quant_method "gptq"):
//   qweight int32 [K*b/32, N]   column n is a little-endian bit stream of K b-bit codes (3-bit
//                               codes cross word boundaries: 32 codes fill 3 words)
//   qzeros  int32 [G, N*b/32]   row g is a bit stream of N zero points; v1 stores zero - 1
//   scales  f16   [G, N]
//   g_idx   int32 [K]           group of each input column; non-monotone with desc_act
//   bias    [N]                 optional
// w[n][k] = (q[n][k] - zero[g][n]) * scale[g][n] with g = g_idx[k] (k / group_size without it).
#include "core/error.hpp"
#include "schema/common.hpp"

namespace hm::schema {

namespace {

// qweight -> codes [N][K]. Codes of one word are consecutive in K, so for 2/4/8 bits (where the
// bit stream is word-aligned) each word becomes 32/b bytes of one output row; columns are
// processed in tiles so that both the reads (a row of qweight) and the writes (one run per output
// row) stay sequential.
void unpack_qweight(const io::TensorView& qweight, int bits, int64_t n, int64_t k, uint8_t* codes) {
  const int64_t rows = k * bits / 32;
  constexpr int64_t kTile = 64;
  const int64_t tiles = (n + kTile - 1) / kTile;
  if (32 % bits == 0) {
    const int per_word = 32 / bits;
    parallel_for(tiles, kTile * k, [&](int64_t t0, int64_t t1) {
      for (int64_t tile = t0; tile < t1; ++tile) {
        const int64_t c_end = std::min(n, (tile + 1) * kTile);
        for (int64_t r = 0; r < rows; ++r) {
          const uint8_t* src = qweight.data + (r * n) * 4;
          for (int64_t c = tile * kTile; c < c_end; ++c)
            unpack_word_aligned_codes_lsb_first(src + c * 4, 4, per_word, bits,
                                                codes + c * k + r * per_word);
        }
      }
    });
    return;
  }
  parallel_for(tiles, kTile * k, [&](int64_t t0, int64_t t1) {
    for (int64_t c = t0 * kTile; c < std::min(n, t1 * kTile); ++c)
      for (int64_t i = 0; i < k; ++i)
        codes[c * k + i] = static_cast<uint8_t>(stream_value(qweight.data + c * 4, n * 4, i, bits));
  });
}

int derive_bits(const Options& options, const io::TensorView& qweight, const io::TensorView* qzeros,
                const io::TensorView* g_idx, int64_t n) {
  if (options.bits > 0) return options.bits;
  if (qzeros && qzeros->shape.size() == 2 && n > 0 && (qzeros->shape[1] * 32) % n == 0)
    return static_cast<int>(qzeros->shape[1] * 32 / n);
  if (g_idx && g_idx->numel() > 0 && (qweight.shape[0] * 32) % g_idx->numel() == 0)
    return static_cast<int>(qweight.shape[0] * 32 / g_idx->numel());
  bad_tensor(qweight, "the bit width cannot be derived without qzeros or g_idx; pass bits");
}

}  // namespace

Layer convert_gptq(const LayerTensors& t, const Options& options) {
  const io::TensorView& qweight = t.require("qweight");
  const io::TensorView& scales = t.require("scales");
  const io::TensorView* qzeros = t.find("qzeros");
  const io::TensorView* g_idx = t.find("g_idx");
  expect_dtype(qweight, {"I32", "U32"});
  expect_ndim(qweight, 2);
  expect_dtype(scales, {"F16", "BF16", "F32"});
  expect_ndim(scales, 2);
  const int64_t n = qweight.shape[1];
  const int bits = derive_bits(options, qweight, qzeros, g_idx, n);
  if (bits != 2 && bits != 3 && bits != 4 && bits != 8)
    bad_tensor(qweight, "GPTQ bit width " + std::to_string(bits) + " is not one of 2, 3, 4, 8",
               HM_ERROR_UNSUPPORTED);
  if ((qweight.shape[0] * 32) % bits != 0)
    bad_tensor(qweight, "the row count does not hold whole " + std::to_string(bits) + "-bit codes");
  const int64_t k = qweight.shape[0] * 32 / bits;
  if (n <= 0 || k <= 0) bad_tensor(qweight, "is empty");
  const int64_t groups = scales.shape[0];
  expect_shape(scales, {groups, n});
  const int64_t group_k = derive_group(options, k, groups, scales);

  IntegerParts parts;
  parts.bits = bits;
  parts.n = n;
  parts.k = k;
  parts.group_k = group_k;
  parts.scale_dtype = float_dtype_of(scales);
  parts.codes.resize(static_cast<size_t>(n * k));
  unpack_qweight(qweight, bits, n, k, parts.codes.data());

  const std::vector<float> s = read_floats(scales);  // [G][N] -> [N][G]
  parts.scales.resize(static_cast<size_t>(n * groups));
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t c = 0; c < n; ++c) parts.scales[c * groups + g] = s[g * n + c];

  if (qzeros) {
    expect_dtype(*qzeros, {"I32", "U32"});
    if ((n * bits) % 32 != 0)
      bad_tensor(*qzeros, "N * bits is not a multiple of 32, so qzeros cannot hold whole rows");
    expect_shape(*qzeros, {groups, n * bits / 32});
    const float offset = options.gptq_v2 ? 0.0f : 1.0f;  // v1 stores zero - 1
    parts.zero_points.resize(static_cast<size_t>(n * groups));
    for (int64_t g = 0; g < groups; ++g) {
      const uint8_t* row = qzeros->data + g * (n * bits / 32) * 4;
      for (int64_t c = 0; c < n; ++c)
        parts.zero_points[c * groups + g] =
            static_cast<float>(stream_value(row, 4, c, bits)) + offset;
    }
  }

  std::vector<int32_t> perm =
      apply_act_order(g_idx, parts.codes, n, k, group_k, groups, options.keep_k_order);

  Layer layer = integer_layer(std::move(parts), options, preferred_16bit({&scales, t.find("bias")}),
                              qzeros ? *qzeros : scales);
  layer.k_permutation = std::move(perm);
  set_bias(layer, t.find("bias"), 1, n);
  return layer;
}

}  // namespace hm::schema
