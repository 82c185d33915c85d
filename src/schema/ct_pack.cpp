// compressed-tensors "pack-quantized" (llm-compressor W4A16 / W8A16 / WnA16):
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
#include "schema/common.hpp"

namespace hm::schema {

namespace {

int derive_ct_bits(const Options& options, const io::TensorView& packed, int64_t k, bool k_known) {
  if (options.bits > 0) return options.bits;
  if (!k_known)
    bad_tensor(packed, "without weight_shape the bit width cannot be derived; pass bits");
  int found = 0;
  for (int b : {2, 3, 4, 5, 6, 8}) {  // 7 and 8 bits both pack 4 codes a word: 8 is meant
    const int64_t f = 32 / b;
    if ((k + f - 1) / f == packed.shape[1]) {
      if (found) bad_tensor(packed, "the bit width is ambiguous from the shapes; pass bits");
      found = b;
    }
  }
  if (!found)
    bad_tensor(packed, "no bit width packs K = " + std::to_string(k) + " into " +
                           std::to_string(packed.shape[1]) + " words");
  return found;
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
  const int64_t per_word = 32 / bits;
  if (!shape) k = packed.shape[1] * per_word;
  if (n <= 0 || k <= 0) bad_tensor(packed, "is empty");
  expect_shape(packed, {n, (k + per_word - 1) / per_word});
  const int64_t groups = scale.shape[1];
  expect_shape(scale, {n, groups});
  const int64_t group_k = derive_group(options, k, groups, scale);

  IntegerParts parts;
  parts.bits = bits;
  parts.n = n;
  parts.k = k;
  parts.group_k = group_k;
  parts.scale_dtype = float_dtype_of(scale);
  parts.codes.resize(static_cast<size_t>(n * k));
  const int64_t words = packed.shape[1];
  uint8_t* codes = parts.codes.data();
  parallel_for(n, k, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      unpack_word_aligned_codes_lsb_first(packed.data + r * words * 4, 4, k, bits, codes + r * k);
  });
  parts.scales = read_floats(scale);  // [N][G] already

  if (zp) {
    parts.zero_points.resize(static_cast<size_t>(n * groups));
    if (zp->dtype == "I8") {  // unpacked signed zero points
      expect_shape(*zp, {n, groups});
      const std::vector<int64_t> z = read_integers(*zp);
      for (size_t i = 0; i < z.size(); ++i)
        parts.zero_points[i] = static_cast<float>(z[i] + (1 << (bits - 1)));
    } else {
      expect_dtype(*zp, {"I32", "U32"});
      expect_shape(*zp, {(n + per_word - 1) / per_word, groups});
      // Packed along N: group g's N zero points are a word-aligned run down column g.
      std::vector<uint8_t> column(static_cast<size_t>(n));
      for (int64_t g = 0; g < groups; ++g) {
        unpack_word_aligned_codes_lsb_first(zp->data + g * 4, groups * 4, n, bits, column.data());
        for (int64_t r = 0; r < n; ++r)
          parts.zero_points[r * groups + g] = static_cast<float>(column[r]);
      }
    }
  }

  std::vector<int32_t> perm =
      apply_act_order(g_idx, parts.codes, n, k, group_k, groups, options.keep_k_order);
  Layer layer = integer_layer(std::move(parts), options, preferred_16bit({&scale, t.find("bias")}),
                              zp ? *zp : scale);
  layer.k_permutation = std::move(perm);
  set_bias(layer, t.find("bias"), 1, n);
  return layer;
}

}  // namespace hm::schema
