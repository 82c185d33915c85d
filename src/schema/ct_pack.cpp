// compressed-tensors "pack-quantized" (llm-compressor W4A16 / W8A16 / WnA16). Two packings of
// bit widths that do not divide 32: the older one below, and compressed-tensors >= 0.20's dense
// one (a little-endian bit stream per row, codes crossing words, ceil(K * b / 32) words).
// options.ct_packing (the config's version) picks; else the shapes do. The older layout:
//   weight_packed     int32 [N, ceil(K / f)], f = floor(32 / b) codes per word: code j of a word
//                     at bits b*j (3-, 5-, 6- and 7-bit codes leave the top bits unused; codes
//                     never cross words), the last word zero-padded
//   weight_shape      int32/int64 [2] = [N, K]
//   weight_scale      [N, G] (G = 1: channel)
//   weight_zero_point int32 [ceil(N / f), G], packed the same way along N (asymmetric only);
//                     an unpacked int8 [N, G] is accepted too
//   weight_g_idx      int32 [K] (actorder "group")
// Codes and zero points are stored as the signed value + 2^(b-1), so with q and z as stored,
// w = (q - z) * scale, and a symmetric layer has z = 2^(b-1) (uint{b}b{2^(b-1)}).
#include "core/error.hpp"
#include "core/quote.hpp"
#include "schema/common.hpp"

namespace hm::schema {

namespace {

// Words of one packed row of `count` codes in each layout.
int64_t aligned_words(int64_t count, int bits) {
  const int64_t f = 32 / bits;
  return (count + f - 1) / f;
}
int64_t dense_words(int64_t count, int bits) { return (count * bits + 31) / 32; }

// The layouts that options allow for `bits`: where bits divides 32 the two are one layout.
bool may_be(CtPacking layout, const Options& options) {
  return options.ct_packing == CtPacking::kUnknown || options.ct_packing == layout;
}

int derive_ct_bits(const Options& options, const io::TensorView& packed, int64_t k, bool k_known) {
  if (options.bits > 0) return options.bits;
  if (!k_known)
    bad_tensor(packed, "without weight_shape the bit width cannot be derived; pass bits");
  int found = 0;
  for (int b : {2, 3, 4, 5, 6, 8}) {  // 7 and 8 bits both pack 4 codes a word: 8 is meant
    const bool fits = (may_be(CtPacking::kWordAligned, options) &&
                       aligned_words(k, b) == packed.shape[1]) ||
                      (may_be(CtPacking::kDense, options) && dense_words(k, b) == packed.shape[1]);
    if (fits) {
      if (found) bad_tensor(packed, "the bit width is ambiguous from the shapes; pass bits");
      found = b;
    }
  }
  if (!found)
    bad_tensor(packed, "no bit width packs K = " + std::to_string(k) + " into " +
                           std::to_string(packed.shape[1]) + " words");
  return found;
}

// Which layout a layer of `bits` uses: options (the config's compressed-tensors version), else
// the one whose word count the shape has. Both layouts put the first floor(32 / bits) codes in
// the same bits, so a row of one word is either.
CtPacking packing_of(const Options& options, const io::TensorView& packed, int64_t k, int bits) {
  if (32 % bits == 0) return CtPacking::kWordAligned;
  if (options.ct_packing != CtPacking::kUnknown) return options.ct_packing;
  const int64_t words = packed.shape[1];
  const bool aligned = aligned_words(k, bits) == words, dense = dense_words(k, bits) == words;
  if (aligned && dense && k > 32 / bits)
    bad_tensor(packed,
               "could be packed either way (whole codes per word, or densely across words as "
               "compressed-tensors >= 0.20 does); pass the layout (--ct-packing dense|aligned, "
               "HM_CONVERT_CT_PACK_*; a model folder's config version says it)");
  return dense ? CtPacking::kDense : CtPacking::kWordAligned;
}

// `count` codes of one packed line into codes[0, count).
void unpack_line(const uint8_t* words, int64_t stride_bytes, int64_t count, int bits,
                 CtPacking layout, uint8_t* codes) {
  if (layout == CtPacking::kWordAligned) {
    unpack_word_aligned_codes_lsb_first(words, stride_bytes, count, bits, codes);
    return;
  }
  for (int64_t i = 0; i < count; ++i)
    codes[i] = static_cast<uint8_t>(stream_value(words, stride_bytes, i, bits));
}

}  // namespace

Layer convert_ct_pack(const LayerTensors& t, const Options& options) {
  const io::TensorView& packed = t.require("weight_packed");
  const io::TensorView& scale = t.require("weight_scale");
  const io::TensorView* shape = t.find("weight_shape");
  const io::TensorView* zp = t.find("weight_zero_point");
  const io::TensorView* g_idx = t.find("weight_g_idx");
  expect_dtype(packed, {"I32", "U32"});
  expect_ndim(packed, 2);
  expect_dtype(scale, {"F16", "BF16", "F32"});
  expect_ndim(scale, 2);
  const int64_t n = packed.shape[0];
  int64_t k = 0;
  if (shape) {
    const std::vector<int64_t> s = read_integers(*shape);
    // K is data, not a shape: bounded before (k + f - 1) / f below can overflow.
    if (s.size() != 2 || s[0] != n || s[1] <= 0 || s[1] > HM_MAX_K)
      bad_tensor(*shape, "must be [N, K] with N = " + std::to_string(n) +
                             " and 0 < K <= HM_MAX_K (" + std::to_string(HM_MAX_K) + ")");
    k = s[1];
  }
  const int bits = derive_ct_bits(options, packed, k, shape != nullptr);
  if (bits < 1 || bits > 8)
    bad_tensor(packed, "bit width " + std::to_string(bits) + " is outside 1..8",
               HM_ERROR_UNSUPPORTED);
  if (!shape) k = packed.shape[1] * (32 / bits);  // no weight_shape: whole words of codes
  if (n <= 0 || k <= 0) bad_tensor(packed, "is empty");
  const CtPacking layout = packing_of(options, packed, k, bits);
  auto words_of = [&](int64_t count) {
    return layout == CtPacking::kDense ? dense_words(count, bits) : aligned_words(count, bits);
  };
  if (packed.shape != std::vector<int64_t>{n, words_of(k)})
    bad_tensor(packed, "expected the shape [" + std::to_string(n) + ", " +
                           std::to_string(words_of(k)) + "] for K = " + std::to_string(k) + " at " +
                           std::to_string(bits) + " bits, packed " +
                           (layout == CtPacking::kDense ? "densely across words"
                                                        : "in whole codes per word"));
  const int64_t groups = scale.shape[1];
  expect_shape(scale, {n, groups});
  const int64_t group_k = derive_group(options, k, groups, scale, g_idx);

  IntegerParts parts;
  parts.bits = bits;
  parts.n = n;
  parts.k = k;
  parts.group_k = group_k;
  parts.scale_dtype = float_dtype_of(scale);
  parts.scale_tensor = &scale;
  parts.codes.resize(static_cast<size_t>(n * k));
  const int64_t words = packed.shape[1];
  uint8_t* codes = parts.codes.data();
  parallel_for(n, k, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      unpack_line(packed.data + r * words * 4, 4, k, bits, layout, codes + r * k);
  });
  parts.scales = read_scales(scale);  // [N][G] already

  if (zp) {
    parts.zero_points.resize(static_cast<size_t>(n * groups));
    if (zp->dtype == "I8") {  // unpacked signed zero points
      expect_shape(*zp, {n, groups});
      const std::vector<int64_t> z = read_integers(*zp);
      for (size_t i = 0; i < z.size(); ++i)
        parts.zero_points[i] = static_cast<float>(z[i] + (1 << (bits - 1)));
    } else {
      expect_dtype(*zp, {"I32", "U32"});
      expect_shape(*zp, {words_of(n), groups});
      // Packed along N: group g's N zero points are a run down column g.
      std::vector<uint8_t> column(static_cast<size_t>(n));
      for (int64_t g = 0; g < groups; ++g) {
        unpack_line(zp->data + g * 4, groups * 4, n, bits, layout, column.data());
        for (int64_t r = 0; r < n; ++r)
          parts.zero_points[r * groups + g] = static_cast<float>(column[r]);
      }
    }
  }

  if (!zp && options.asymmetric)
    fail(HM_ERROR_INVALID_ARGUMENT,
         "the checkpoint is asymmetric (symmetric: false) but has no zero points: tensor " +
             core::quoted(t.full_name("weight_zero_point"), 160) + " is missing");

  std::vector<int32_t> perm =
      apply_act_order(g_idx, parts.codes, n, k, group_k, groups, options.keep_k_order);
  Layer layer = integer_layer(std::move(parts), options, preferred_16bit({&scale, t.find("bias")}),
                              zp ? *zp : scale);
  layer.k_permutation = std::move(perm);
  set_bias(layer, t.find("bias"), 1, n);
  return layer;
}

}  // namespace hm::schema
