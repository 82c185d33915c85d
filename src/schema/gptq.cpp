// GPTQ (AutoGPTQ / GPTQModel, quant_method "gptq"):
//   qweight int32 [K*b/32, N]   column n is a little-endian bit stream of K b-bit codes (3-bit
//                               codes cross word boundaries: 32 codes fill 3 words)
//   qzeros  int32 [G, N*b/32]   row g is a bit stream of N zero points; v1 stores zero - 1
//   scales  f16   [G, N]
//   g_idx   int32 [K]           group of each input column; non-monotone with desc_act
//   bias    [N]                 optional
// w[n][k] = (q[n][k] - zero[g][n]) * scale[g][n] with g = g_idx[k] (k / group_size without it).
#include <cstring>

#include "core/error.hpp"
#include "core/quote.hpp"
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

bool gptq_bits(int64_t b) { return b == 2 || b == 3 || b == 4 || b == 8; }

// The bit width: options (the config), else what g_idx says (its length is K exactly), else what
// qzeros says. A qzeros shape that disagrees with g_idx is then reported on qzeros, not as a
// g_idx of the wrong length.
int derive_bits(const Options& options, const io::TensorView& qweight, const io::TensorView* qzeros,
                const io::TensorView* g_idx, int64_t n) {
  if (options.bits > 0) return options.bits;
  if (g_idx && g_idx->numel() > 0 && (qweight.shape[0] * 32) % g_idx->numel() == 0 &&
      gptq_bits(qweight.shape[0] * 32 / g_idx->numel()))
    return static_cast<int>(qweight.shape[0] * 32 / g_idx->numel());
  if (qzeros && qzeros->shape.size() == 2 && n > 0 && (qzeros->shape[1] * 32) % n == 0)
    return static_cast<int>(qzeros->shape[1] * 32 / n);
  if (g_idx)
    bad_tensor(*g_idx, "has " + std::to_string(g_idx->numel()) + " entries, which give qweight (" +
                           std::to_string(qweight.shape[0]) +
                           " rows) no GPTQ bit width; pass bits (the config's 'bits')");
  bad_tensor(qweight, "the bit width cannot be derived without qzeros or g_idx; pass bits");
}

// Real zero points [N][G] from qzeros [G, N*b/32]. v2 stores them as they are; v1 stores
// zero - 1, and its writers disagree on a zero of 0 (docs/convert.md):
//  - AutoGPTQ packs each field (zero - 1) and its kernels add 1 per field: a stored all-ones
//    field reads back as 2^b (kept: it is what that model computes with).
//  - GPTQModel subtracts 0x11111111 (0x55555555, 0x01010101 for 2, 8 bits) from the whole
//    word, so a zero of 0 borrows from the next field, and its loader adds the constant back to
//    the whole word. 3-bit fields cross words, so GPTQModel shifts each field mod 8 instead.
//  - Unknown writer: the two agree unless a field holds all ones; such a layer is refused.
std::vector<float> read_zero_points(const io::TensorView& qzeros, int bits, int64_t n,
                                    int64_t groups, const Options& options) {
  const int64_t words = n * bits / 32;
  const uint32_t all_ones = (1u << bits) - 1u;
  std::vector<float> zeros(static_cast<size_t>(n * groups));
  GptqV1Zeros writer = options.gptq_v1_zeros;
  if (!options.gptq_v2 && writer == GptqV1Zeros::kUnknown) {
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t c = 0; c < n; ++c)
        if (stream_value(qzeros.data + g * words * 4, 4, c, bits) == all_ones)
          bad_tensor(qzeros,
                     "the zero point of group " + std::to_string(g) + ", column " +
                         std::to_string(c) +
                         " is stored as all ones, which GPTQ v1's writers read differently "
                         "(AutoGPTQ: " +
                         std::to_string(1 << bits) +
                         "; GPTQModel: 0, borrowing from the next field); say who wrote the "
                         "checkpoint (--gptq-writer autogptq|gptqmodel, HM_CONVERT_GPTQ_V1_*; a "
                         "model folder's quantize_config meta.quantizer says it)",
                     HM_ERROR_UNSUPPORTED);
    writer = GptqV1Zeros::kAutoGptq;
  }
  std::vector<uint8_t> row(static_cast<size_t>(words * 4));
  uint32_t word_constant = 0;
  for (int j = 0; j < 32 / bits; ++j) word_constant |= 1u << (bits * j);
  for (int64_t g = 0; g < groups; ++g) {
    std::memcpy(row.data(), qzeros.data + g * words * 4, row.size());
    const bool whole_words = !options.gptq_v2 && writer == GptqV1Zeros::kGptqModel && bits != 3;
    if (whole_words)
      for (int64_t w = 0; w < words; ++w) {
        uint32_t v;
        std::memcpy(&v, row.data() + 4 * w, 4);
        v += word_constant;  // mod 2^32, exactly GPTQModel's int32 addition
        std::memcpy(row.data() + 4 * w, &v, 4);
      }
    for (int64_t c = 0; c < n; ++c) {
      uint32_t z = stream_value(row.data(), 4, c, bits);
      if (!options.gptq_v2 && !whole_words)
        z = writer == GptqV1Zeros::kGptqModel ? (z + 1) & all_ones : z + 1;
      zeros[c * groups + g] = static_cast<float>(z);
    }
  }
  return zeros;
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
  const int64_t group_k = derive_group(options, k, groups, scales, g_idx);

  IntegerParts parts;
  parts.bits = bits;
  parts.n = n;
  parts.k = k;
  parts.group_k = group_k;
  parts.scale_dtype = float_dtype_of(scales);
  parts.scale_tensor = &scales;
  parts.codes.resize(static_cast<size_t>(n * k));
  unpack_qweight(qweight, bits, n, k, parts.codes.data());

  const std::vector<float> s = read_scales(scales);  // [G][N] -> [N][G]
  parts.scales.resize(static_cast<size_t>(n * groups));
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t c = 0; c < n; ++c) parts.scales[c * groups + g] = s[g * n + c];

  if (qzeros) {
    expect_dtype(*qzeros, {"I32", "U32"});
    if ((n * bits) % 32 != 0)
      bad_tensor(*qzeros, "N * bits is not a multiple of 32, so qzeros cannot hold whole rows");
    expect_shape(*qzeros, {groups, n * bits / 32});
    parts.zero_points = read_zero_points(*qzeros, bits, n, groups, options);
  } else if (options.asymmetric) {
    fail(HM_ERROR_INVALID_ARGUMENT,
         "the checkpoint is asymmetric (sym: false) but has no zero points: tensor " +
             core::quoted(t.full_name("qzeros"), 160) +
             " is missing (converting it as symmetric would shift every weight)");
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
