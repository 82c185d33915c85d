// Converter fidelity with the tools that write checkpoints (issue 19): GPTQ v1 zero points as
// AutoGPTQ and GPTQModel pack and load them (a zero point of 0 included), the group size from
// the config rather than K / scale rows (a partial last group), asymmetric configs without zero
// points, non-finite scales through both doors, tensors of different layers, compressed-tensors'
// dense packing of 3-bit codes, and messages that name the tensor that is wrong.
#include <unistd.h>

#include <cstdio>

#include "io/safetensors.hpp"
#include "test_schema_support.hpp"

namespace {

using namespace schema_test;

// `values` (< 2^bits each) as a little-endian bit stream in 32-bit words: AutoGPTQ's packing of
// a qweight column or a qzeros row (3-bit values cross words), and compressed-tensors >= 0.20's
// dense packing. The last word is zero-padded.
std::vector<uint32_t> pack_stream(const std::vector<uint32_t>& values, int bits) {
  std::vector<uint32_t> words((values.size() * bits + 31) / 32, 0);
  for (size_t i = 0; i < values.size(); ++i)
    for (int b = 0; b < bits; ++b)
      if ((values[i] >> b) & 1u) words[(i * bits + b) / 32] |= 1u << ((i * bits + b) % 32);
  return words;
}

// qweight [K*b/32, N] from codes [N][K].
std::vector<uint32_t> gptq_qweight(const std::vector<uint32_t>& q, int64_t n, int64_t k, int bits) {
  std::vector<uint32_t> out(static_cast<size_t>(k * bits / 32 * n));
  for (int64_t c = 0; c < n; ++c) {
    const std::vector<uint32_t> w =
        pack_stream(std::vector<uint32_t>(q.begin() + c * k, q.begin() + (c + 1) * k), bits);
    for (size_t r = 0; r < w.size(); ++r) out[r * n + c] = w[r];
  }
  return out;
}

// A GPTQ layer whose real zero points are given [G][N]; qzeros is left to the caller.
struct Gptq {
  int bits;
  int64_t n, k, group;
  std::vector<uint32_t> q;        // [N][K]
  std::vector<double> scales;     // [G][N]
  std::vector<uint32_t> zeros;    // [G][N], real
  std::vector<Tensor> tensors;    // qweight, scales
  std::vector<float> reference;   // (q - zero) * scale, [N][K]
};

Gptq make_gptq(int bits, int64_t n, int64_t k, int64_t group, uint32_t seed,
               const std::string& prefix = "model.layers.3.mlp.down_proj") {
  std::mt19937 rng(seed);
  Gptq g{bits, n, k, group, {}, {}, {}, {}, {}};
  const int64_t groups = (k + group - 1) / group;
  g.q.resize(static_cast<size_t>(n * k));
  for (auto& v : g.q) v = rng() & ((1u << bits) - 1);
  g.scales.resize(static_cast<size_t>(groups * n));
  for (auto& s : g.scales)
    s = round_to(HM_DTYPE_F16, std::uniform_real_distribution<double>(1e-3, 0.05)(rng));
  g.zeros.resize(static_cast<size_t>(groups * n));
  for (auto& z : g.zeros) z = rng() & ((1u << bits) - 1);
  // Zero points of 0 at the bottom, middle and top field of a word, and two in a row.
  for (int64_t c : {int64_t{0}, int64_t{3}, int64_t{4}, n - 1}) g.zeros[c] = 0;
  g.tensors = {make_tensor(prefix + ".qweight", "I32", {k * bits / 32, n},
                           gptq_qweight(g.q, n, k, bits)),
               f16_tensor(prefix + ".scales", {groups, n}, g.scales)};
  g.reference.resize(static_cast<size_t>(n * k));
  for (int64_t c = 0; c < n; ++c)
    for (int64_t i = 0; i < k; ++i) {
      const int64_t gi = i / group;
      g.reference[c * k + i] = f32((double(g.q[c * k + i]) - g.zeros[gi * n + c]) *
                                   g.scales[gi * n + c]);
    }
  return g;
}

// qzeros as GPTQModel writes v1: the v2 words minus 1 in every field of the whole int32 word
// (a zero of 0 borrows from the next field); 3-bit fields are shifted one by one, mod 8.
std::vector<uint32_t> gptqmodel_v1_qzeros(const Gptq& g) {
  const int64_t groups = static_cast<int64_t>(g.zeros.size()) / g.n;
  std::vector<uint32_t> out;
  uint32_t ones = 0;
  for (int j = 0; j < 32 / g.bits; ++j) ones |= 1u << (g.bits * j);
  for (int64_t gi = 0; gi < groups; ++gi) {
    std::vector<uint32_t> row(g.zeros.begin() + gi * g.n, g.zeros.begin() + (gi + 1) * g.n);
    if (g.bits == 3)
      for (auto& z : row) z = (z - 1) & 7u;
    std::vector<uint32_t> words = pack_stream(row, g.bits);
    if (g.bits != 3)
      for (auto& w : words) w -= ones;
    out.insert(out.end(), words.begin(), words.end());
  }
  return out;
}

// qzeros as AutoGPTQ's pack() writes v1 (4-bit): zeros - 1 as uint32, each shifted into its
// word and OR-ed, so a zero of 0 (0xffffffff) also sets every higher field of the word.
std::vector<uint32_t> autogptq_v1_qzeros(const Gptq& g) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < g.zeros.size(); i += 8) {
    uint32_t w = 0;
    for (int j = 0; j < 8; ++j) w |= static_cast<uint32_t>(g.zeros[i + j] - 1) << (4 * j);
    out.push_back(w);
  }
  return out;
}

// What AutoGPTQ's kernels compute from those qzeros: each field + 1, no carry.
std::vector<float> autogptq_dequant(const Gptq& g, const std::vector<uint32_t>& qzeros) {
  std::vector<float> out(g.reference.size());
  for (int64_t c = 0; c < g.n; ++c)
    for (int64_t i = 0; i < g.k; ++i) {
      const int64_t gi = i / g.group;
      const uint32_t field = (qzeros[gi * (g.n / 8) + c / 8] >> (4 * (c % 8))) & 15u;
      out[c * g.k + i] =
          f32((double(g.q[c * g.k + i]) - (field + 1.0)) * g.scales[gi * g.n + c]);
    }
  return out;
}

hm_convert_options_t options_with(uint32_t flags, int32_t group = 0) {
  hm_convert_options_t o;
  hm_convert_options_init(&o);
  o.flags = flags;
  o.group_size = group;
  return o;
}

TEST(GptqV1Zeros, GptqModelWholeWordPackingWithZeroPointsOfZero) {
  for (int bits : {2, 3, 4, 8}) {
    Gptq g = make_gptq(bits, 64, 128, 64, 40u + bits);
    const int64_t groups = 2;
    g.tensors.push_back(make_tensor("model.layers.3.mlp.down_proj.qzeros", "I32",
                                    {groups, 64 * bits / 32}, gptqmodel_v1_qzeros(g)));
    hm_convert_options_t o = options_with(HM_CONVERT_GPTQ_V1_GPTQMODEL);
    const Converted out = convert(HM_SCHEME_GPTQ, g.tensors, &o);
    ASSERT_EQ(out.status, HM_SUCCESS) << bits << ": " << out.error;
    expect_bitwise(out.in_checkpoint_order, g.reference, std::to_string(bits) + "-bit GPTQModel");
    EXPECT_EQ(out.zero_point_dtype, hm::core::Dtype::integer(false, bits).code()) << out.format;
    // Writer unknown: the stored all-ones fields make the layer ambiguous, so it is refused.
    const Converted unknown = convert(HM_SCHEME_GPTQ, g.tensors);
    EXPECT_EQ(unknown.status, HM_ERROR_UNSUPPORTED) << bits;
    EXPECT_NE(unknown.error.find("down_proj.qzeros"), std::string::npos) << unknown.error;
    EXPECT_NE(unknown.error.find("--gptq-writer"), std::string::npos) << unknown.error;
  }
}

TEST(GptqV1Zeros, AutoGptqFieldPackingWithZeroPointsOfZero) {
  Gptq g = make_gptq(4, 64, 128, 64, 50u);
  const std::vector<uint32_t> qzeros = autogptq_v1_qzeros(g);
  g.tensors.push_back(
      make_tensor("model.layers.3.mlp.down_proj.qzeros", "I32", {2, 8}, qzeros));
  hm_convert_options_t o = options_with(HM_CONVERT_GPTQ_V1_AUTOGPTQ);
  const Converted out = convert(HM_SCHEME_GPTQ, g.tensors, &o);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  expect_bitwise(out.in_checkpoint_order, autogptq_dequant(g, qzeros), "AutoGPTQ");
  // Both writer flags at once is a caller error.
  o.flags |= HM_CONVERT_GPTQ_V1_GPTQMODEL;
  EXPECT_EQ(convert(HM_SCHEME_GPTQ, g.tensors, &o).status, HM_ERROR_INVALID_ARGUMENT);
}

// K = 288 in groups of 128: three scale rows, the last group 32 wide, no g_idx.
TEST(GroupSize, PartialLastGroupComesFromTheConfigNotTheShapes) {
  Gptq g = make_gptq(4, 32, 288, 128, 60u);
  std::vector<uint32_t> v2;
  for (int64_t gi = 0; gi < 3; ++gi) {
    const auto w = pack_stream(
        std::vector<uint32_t>(g.zeros.begin() + gi * 32, g.zeros.begin() + (gi + 1) * 32), 4);
    v2.insert(v2.end(), w.begin(), w.end());
  }
  g.tensors.push_back(make_tensor("model.layers.3.mlp.down_proj.qzeros", "I32", {3, 4}, v2));
  hm_convert_options_t o = options_with(HM_CONVERT_GPTQ_V2, 128);
  const Converted out = convert(HM_SCHEME_GPTQ, g.tensors, &o);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  EXPECT_EQ(out.group_k, 128) << out.format;
  expect_bitwise(out.in_checkpoint_order, g.reference, "g128 with K = 288");
  // Without the group size both 96 and 128 fit: refused, asking for it.
  o.group_size = 0;
  const Converted guess = convert(HM_SCHEME_GPTQ, g.tensors, &o);
  EXPECT_EQ(guess.status, HM_ERROR_INVALID_ARGUMENT) << guess.format;
  EXPECT_NE(guess.error.find("96 and 128"), std::string::npos) << guess.error;
  EXPECT_NE(guess.error.find("--group-size"), std::string::npos) << guess.error;
  // An in-order g_idx says 128.
  std::vector<int32_t> g_idx(288);
  for (int i = 0; i < 288; ++i) g_idx[i] = i / 128;
  g.tensors.push_back(make_tensor("model.layers.3.mlp.down_proj.g_idx", "I32", {288}, g_idx));
  const Converted from_gidx = convert(HM_SCHEME_GPTQ, g.tensors, &o);
  ASSERT_EQ(from_gidx.status, HM_SUCCESS) << from_gidx.error;
  expect_bitwise(from_gidx.in_checkpoint_order, g.reference, "g128 from g_idx");
}

TEST(Asymmetric, MissingZeroPointsAreAnError) {
  const Gptq g = make_gptq(4, 32, 128, 64, 70u);  // qweight and scales only
  hm_convert_options_t o = options_with(HM_CONVERT_ASYMMETRIC);
  o.bits = 4;  // nothing else says it without qzeros and g_idx
  const Converted out = convert(HM_SCHEME_GPTQ, g.tensors, &o);
  EXPECT_EQ(out.status, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(out.error.find("'model.layers.3.mlp.down_proj.qzeros'"), std::string::npos)
      << out.error;
  // Without the flag (no config) the layer is symmetric, as before.
  o.flags = 0;
  EXPECT_EQ(convert(HM_SCHEME_GPTQ, g.tensors, &o).status, HM_SUCCESS);
}

TEST(NonFinite, ScalesAreRefusedThroughBothDoorsNamingLayerTensorAndElement) {
  Gptq g = make_gptq(4, 32, 128, 64, 80u);
  std::vector<uint32_t> v2(2 * 4, 0x88888888u);
  g.tensors.push_back(make_tensor("model.layers.3.mlp.down_proj.qzeros", "I32", {2, 4}, v2));
  const uint16_t nan = 0x7e00;
  std::memcpy(g.tensors[1].bytes.data() + 2 * (32 + 5), &nan, 2);  // scales[1][5]
  hm_convert_options_t o = options_with(HM_CONVERT_GPTQ_V2);
  const Converted out = convert(HM_SCHEME_GPTQ, g.tensors, &o);
  EXPECT_EQ(out.status, HM_ERROR_NON_FINITE);
  for (const char* part : {"layer 'model.layers.3.mlp.down_proj'", "down_proj.scales'",
                           "element 37 ([1, 5]) is NaN"})
    EXPECT_NE(out.error.find(part), std::string::npos) << part << " in " << out.error;

  const std::string in = std::string(HM_TEST_BINARY_DIR) + "/nonfinite_" +
                         std::to_string(::getpid()) + ".safetensors";
  hm::io::SafetensorsWriter w;
  for (const Tensor& t : g.tensors)
    w.add_borrowed(t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size());
  w.write(in);
  EXPECT_EQ(hm_convert_file("gptq", in.c_str(), (in + ".out").c_str(), &o), HM_ERROR_NON_FINITE);
  EXPECT_NE(last_error().find("element 37 ([1, 5]) is NaN"), std::string::npos) << last_error();
  std::remove(in.c_str());

  // ct-nvfp4 divides by its global scale: 1/g must be finite in f32.
  std::vector<uint8_t> packed(16 * 16, 0x21), block(16 * 2, 0x38);
  const std::vector<Tensor> nv = {make_tensor("l.weight_packed", "U8", {16, 16}, packed),
                                  make_tensor("l.weight_scale", "F8_E4M3", {16, 2}, block),
                                  f32_tensor("l.weight_global_scale", {1}, {1e-45})};
  const Converted tiny = convert(HM_SCHEME_CT_NVFP4, nv);
  EXPECT_EQ(tiny.status, HM_ERROR_NON_FINITE) << tiny.format;
  EXPECT_NE(tiny.error.find("weight_global_scale"), std::string::npos) << tiny.error;
}

TEST(Layers, TensorsOfDifferentLayersAreRefused) {
  const Gptq a = make_gptq(4, 32, 128, 64, 90u, "model.layers.0.mlp.up_proj");
  const Gptq b = make_gptq(4, 32, 128, 64, 91u, "model.layers.1.mlp.up_proj");
  const Converted out = convert(HM_SCHEME_GPTQ, {a.tensors[0], b.tensors[1]});
  EXPECT_EQ(out.status, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(out.error.find("model.layers.0.mlp.up_proj"), std::string::npos) << out.error;
  EXPECT_NE(out.error.find("model.layers.1.mlp.up_proj"), std::string::npos) << out.error;
}

// compressed-tensors 3-bit, asymmetric, group 32: codes packed densely along K (12 words for
// K = 128, where the older packing needs 13) and zero points densely along N.
struct Ct3 {
  std::vector<Tensor> dense, aligned;
  std::vector<float> reference;
};
Ct3 make_ct3(uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t n = 32, k = 128, g = 32, groups = 4;
  std::vector<uint32_t> q(n * k), z(n * groups);
  for (auto& v : q) v = rng() & 7u;
  for (auto& v : z) v = rng() & 7u;
  std::vector<double> s(n * groups);
  for (auto& v : s) v = round_to(HM_DTYPE_BF16, std::uniform_real_distribution<double>(0.01, 1)(rng));
  Ct3 c;
  std::vector<uint32_t> dense_w, aligned_w;
  for (int64_t r = 0; r < n; ++r) {
    const std::vector<uint32_t> row(q.begin() + r * k, q.begin() + (r + 1) * k);
    const auto d = pack_stream(row, 3);
    dense_w.insert(dense_w.end(), d.begin(), d.end());
    for (int64_t w = 0; w < (k + 9) / 10; ++w) {  // 10 whole codes a word
      uint32_t word = 0;
      for (int64_t j = 0; j < 10 && w * 10 + j < k; ++j) word |= row[w * 10 + j] << (3 * j);
      aligned_w.push_back(word);
    }
  }
  // Zero points [N][G] packed along N: dense column streams, [ceil(N*3/32), G].
  std::vector<uint32_t> zp(((n * 3 + 31) / 32) * groups);
  for (int64_t gi = 0; gi < groups; ++gi) {
    std::vector<uint32_t> col(n);
    for (int64_t r = 0; r < n; ++r) col[r] = z[r * groups + gi];
    const auto words = pack_stream(col, 3);
    for (size_t w = 0; w < words.size(); ++w) zp[w * groups + gi] = words[w];
  }
  const Tensor scale = f16_tensor("m.o_proj.weight_scale", {n, groups}, s, HM_DTYPE_BF16);
  const Tensor shape = make_tensor("m.o_proj.weight_shape", "I64", {2}, std::vector<int64_t>{n, k});
  c.dense = {make_tensor("m.o_proj.weight_packed", "I32", {n, 12}, dense_w), scale, shape,
             make_tensor("m.o_proj.weight_zero_point", "I32", {3, groups}, zp)};
  c.aligned = {make_tensor("m.o_proj.weight_packed", "I32", {n, 13}, aligned_w), scale, shape};
  c.reference.resize(n * k);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < k; ++i)
      c.reference[r * k + i] =
          f32((double(q[r * k + i]) - z[r * groups + i / g]) * s[r * groups + i / g]);
  return c;
}

TEST(CtPack, DenseThreeBitPackingOfCompressedTensors020) {
  const Ct3 c = make_ct3(100u);
  hm_convert_options_t o = options_with(HM_CONVERT_CT_PACK_DENSE, 32);
  const Converted dense = convert(HM_SCHEME_CT_PACK, c.dense, &o);
  ASSERT_EQ(dense.status, HM_SUCCESS) << dense.error;
  expect_bitwise(dense.weight, c.reference, "dense 3-bit");
  // No flag: the word count (12, not 13) says dense.
  hm_convert_options_t shapes = options_with(0, 32);
  const Converted guessed = convert(HM_SCHEME_CT_PACK, c.dense, &shapes);
  ASSERT_EQ(guessed.status, HM_SUCCESS) << guessed.error;
  expect_bitwise(guessed.weight, c.reference, "dense 3-bit from the shapes");
  // The older packing still reads (symmetric here), and a config saying dense refuses it.
  const Converted aligned = convert(HM_SCHEME_CT_PACK, c.aligned, &shapes);
  ASSERT_EQ(aligned.status, HM_SUCCESS) << aligned.error;
  const Converted wrong = convert(HM_SCHEME_CT_PACK, c.aligned, &o);
  EXPECT_EQ(wrong.status, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(wrong.error.find("weight_packed"), std::string::npos) << wrong.error;
  // Asymmetric config without zero points.
  hm_convert_options_t asym = options_with(HM_CONVERT_ASYMMETRIC, 32);
  const Converted missing = convert(HM_SCHEME_CT_PACK, c.aligned, &asym);
  EXPECT_EQ(missing.status, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(missing.error.find("'m.o_proj.weight_zero_point'"), std::string::npos)
      << missing.error;
}

TEST(Messages, ABadQzerosShapeIsReportedOnQzeros) {
  Gptq g = make_gptq(4, 64, 128, 64, 110u);
  std::vector<int32_t> g_idx(128);
  for (int i = 0; i < 128; ++i) g_idx[i] = i / 64;
  g.tensors.push_back(make_tensor("model.layers.3.mlp.down_proj.g_idx", "I32", {128}, g_idx));
  // qzeros with 16 words a row: what 8 bits would need for N = 64, not 4 bits.
  g.tensors.push_back(make_tensor("model.layers.3.mlp.down_proj.qzeros", "I32", {2, 16},
                                  std::vector<uint32_t>(32, 0x77777777u)));
  const Converted out = convert(HM_SCHEME_GPTQ, g.tensors);
  EXPECT_EQ(out.status, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(out.error.find("down_proj.qzeros'"), std::string::npos) << out.error;
  EXPECT_EQ(out.error.find("g_idx"), std::string::npos) << out.error;
}

}  // namespace
