// GPTQ: tensors packed the way AutoGPTQ packs them (its 3-bit word-splitting loop written out),
// converted, dequantized and compared bit for bit with GPTQ's own dequantization
// w = (q - zero) * scale, for 2/3/4/8 bits, group sizes -1/32/64/128, v1/v2 zeros, symmetric and
// asymmetric, with and without act-order (a shuffled g_idx).
#include <algorithm>
#include <numeric>

#include "test_schema_support.hpp"

namespace {

using namespace schema_test;

// One line of `count` b-bit values into 32-bit words as AutoGPTQ's pack() writes it: whole values
// for 2/4/8 bits; for 3 bits, 32 values fill three words and values 10 and 21 straddle words.
std::vector<uint32_t> autogptq_pack(const std::vector<uint32_t>& v, int bits) {
  std::vector<uint32_t> out(v.size() * bits / 32, 0);
  size_t i = 0, row = 0;
  while (row < out.size()) {
    if (bits == 2 || bits == 4 || bits == 8) {
      for (size_t j = i; j < i + 32 / bits; ++j) out[row] |= v[j] << (bits * (j - i));
      i += 32 / bits;
      row += 1;
    } else {  // 3 bits
      for (size_t j = i; j < i + 10; ++j) out[row] |= v[j] << (3 * (j - i));
      i += 10;
      out[row] |= v[i] << 30;
      row += 1;
      out[row] |= (v[i] >> 2) & 1u;
      i += 1;
      for (size_t j = i; j < i + 10; ++j) out[row] |= v[j] << (3 * (j - i) + 1);
      i += 10;
      out[row] |= v[i] << 31;
      row += 1;
      out[row] |= (v[i] >> 1) & 3u;
      i += 1;
      for (size_t j = i; j < i + 10; ++j) out[row] |= v[j] << (3 * (j - i) + 2);
      i += 10;
      row += 1;
    }
  }
  return out;
}

struct GptqCase {
  int bits;
  int group;  // -1: per channel
  bool v2;
  bool symmetric;
  bool act_order;
};

std::string case_name(const testing::TestParamInfo<GptqCase>& info) {
  const GptqCase& c = info.param;
  return "b" + std::to_string(c.bits) + "_g" +
         (c.group < 0 ? std::string("ch") : std::to_string(c.group)) + (c.v2 ? "_v2" : "_v1") +
         (c.symmetric ? "_sym" : "_asym") + (c.act_order ? "_actorder" : "");
}

// A GPTQ checkpoint layer plus its own dequantization.
struct GptqLayer {
  std::vector<Tensor> tensors;
  std::vector<float> reference;  // [N][K], checkpoint column order
  std::vector<int32_t> g_idx;
};

GptqLayer make_gptq(const GptqCase& c, int64_t n, int64_t k, uint32_t seed, bool with_bias = false,
                    bool avoid_top_zero = false) {
  std::mt19937 rng(seed);
  const int64_t g = c.group < 0 ? k : c.group;
  const int64_t groups = (k + g - 1) / g;
  const uint32_t top = (1u << c.bits) - 1;
  GptqLayer out;
  // g_idx: k / g, or act-order: quantization order P, column P[i] in group i / g.
  out.g_idx.resize(static_cast<size_t>(k));
  std::vector<int32_t> order(static_cast<size_t>(k));
  std::iota(order.begin(), order.end(), 0);
  if (c.act_order) std::shuffle(order.begin(), order.end(), rng);
  for (int64_t i = 0; i < k; ++i) out.g_idx[order[i]] = static_cast<int32_t>(i / g);

  std::uniform_int_distribution<uint32_t> code(0, top);
  std::vector<uint32_t> q(static_cast<size_t>(n * k));  // [N][K]
  for (auto& v : q) v = code(rng);
  std::vector<double> scales(static_cast<size_t>(groups * n));  // [G][N]
  std::uniform_real_distribution<double> sd(1e-3, 0.05);
  for (auto& s : scales) s = round_to(HM_DTYPE_F16, sd(rng));
  std::vector<uint32_t> stored_zero(static_cast<size_t>(groups * n));  // [G][N]
  const uint32_t offset = c.v2 ? 0 : 1;
  for (auto& z : stored_zero) {
    if (c.symmetric)
      z = (1u << (c.bits - 1)) - offset;
    else
      z = std::uniform_int_distribution<uint32_t>(0, avoid_top_zero ? top - 1 : top)(rng);
  }

  std::vector<uint32_t> qweight(static_cast<size_t>(k * c.bits / 32 * n));
  for (int64_t col = 0; col < n; ++col) {
    std::vector<uint32_t> line(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) line[i] = q[col * k + i];
    const std::vector<uint32_t> words = autogptq_pack(line, c.bits);
    for (size_t r = 0; r < words.size(); ++r) qweight[r * n + col] = words[r];
  }
  std::vector<uint32_t> qzeros;
  for (int64_t gi = 0; gi < groups; ++gi) {
    std::vector<uint32_t> line(stored_zero.begin() + gi * n, stored_zero.begin() + (gi + 1) * n);
    const std::vector<uint32_t> words = autogptq_pack(line, c.bits);
    qzeros.insert(qzeros.end(), words.begin(), words.end());
  }
  out.tensors.push_back(
      make_tensor("model.layers.3.mlp.down_proj.qweight", "I32", {k * c.bits / 32, n}, qweight));
  out.tensors.push_back(
      make_tensor("model.layers.3.mlp.down_proj.qzeros", "I32", {groups, n * c.bits / 32}, qzeros));
  out.tensors.push_back(f16_tensor("model.layers.3.mlp.down_proj.scales", {groups, n}, scales));
  out.tensors.push_back(make_tensor("model.layers.3.mlp.down_proj.g_idx", "I32", {k}, out.g_idx));
  if (with_bias) {
    std::vector<double> b(static_cast<size_t>(n));
    for (auto& v : b) v = round_to(HM_DTYPE_F16, sd(rng) - 0.02);
    out.tensors.push_back(f16_tensor("model.layers.3.mlp.down_proj.bias", {n}, b));
  }

  out.reference.resize(static_cast<size_t>(n * k));
  for (int64_t col = 0; col < n; ++col)
    for (int64_t i = 0; i < k; ++i) {
      const int64_t gi = out.g_idx[i];
      const double zero = static_cast<double>(stored_zero[gi * n + col]) + offset;
      out.reference[col * k + i] =
          f32((static_cast<double>(q[col * k + i]) - zero) * scales[gi * n + col]);
    }
  return out;
}

class GptqConvert : public testing::TestWithParam<GptqCase> {};

TEST_P(GptqConvert, DequantizesExactlyLikeGptq) {
  const GptqCase c = GetParam();
  const int64_t n = 64, k = 256;
  const GptqLayer layer =
      make_gptq(c, n, k, 1000u + c.bits * 7 + c.group + c.v2 * 3 + c.symmetric * 5 + c.act_order);
  hm_convert_options_t options;
  hm_convert_options_init(&options);
  // v1 zeros packed field by field, as AutoGPTQ writes them (test_schema_fidelity.cpp has
  // GPTQModel's whole-word packing).
  options.flags |= c.v2 ? HM_CONVERT_GPTQ_V2 : HM_CONVERT_GPTQ_V1_AUTOGPTQ;
  const Converted out = convert(HM_SCHEME_GPTQ, layer.tensors, &options);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  EXPECT_EQ(out.n, n);
  EXPECT_EQ(out.k, k);
  expect_bitwise(out.in_checkpoint_order, layer.reference, out.format);

  // The dtype the zero points ask for.
  if (c.symmetric) {
    EXPECT_EQ(out.weight_dtype, hm::core::Dtype::biased_integer(c.bits).code()) << out.format;
    EXPECT_EQ(out.zero_point_dtype, HM_DTYPE_NONE) << out.format;
  } else {
    EXPECT_EQ(out.weight_dtype, hm::core::Dtype::integer(false, c.bits).code()) << out.format;
    EXPECT_NE(out.zero_point_dtype, HM_DTYPE_NONE) << out.format;
  }
  EXPECT_EQ(out.scale_kind, c.group < 0 ? HM_SCALE_CHANNEL : HM_SCALE_GROUP) << out.format;
  if (c.group > 0) {
    EXPECT_EQ(out.group_k, c.group);
  }

  // Act-order: a permutation that makes each group contiguous; none without act-order.
  if (c.act_order && c.group > 0) {
    ASSERT_EQ(out.permutation.size(), static_cast<size_t>(k));
    std::vector<int32_t> sorted = out.permutation;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < k; ++i) ASSERT_EQ(sorted[i], i) << "not a permutation";
    for (int64_t i = 0; i < k; ++i)
      EXPECT_EQ(layer.g_idx[out.permutation[i]], i / c.group) << "column " << i;
  } else {
    EXPECT_TRUE(out.permutation.empty());
  }
}

std::vector<GptqCase> all_cases() {
  std::vector<GptqCase> cases;
  for (int bits : {2, 3, 4, 8})
    for (int group : {-1, 32, 64, 128})
      for (bool v2 : {false, true})
        for (bool sym : {false, true})
          for (bool act : {false, true}) cases.push_back({bits, group, v2, sym, act});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllLayouts, GptqConvert, testing::ValuesIn(all_cases()), case_name);

TEST(GptqConvert, IntegerZeroPointsWhenTheyFit) {
  // v2 zeros within 0..15 become uint4 zero points (the integer path, not the float one).
  const GptqLayer layer = make_gptq({4, 128, true, false, false}, 64, 256, 7, false, true);
  hm_convert_options_t options;
  hm_convert_options_init(&options);
  options.flags = HM_CONVERT_GPTQ_V2;
  const Converted out = convert(HM_SCHEME_GPTQ, layer.tensors, &options);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  EXPECT_EQ(out.zero_point_dtype, HM_DTYPE_UINT4) << out.format;
  expect_bitwise(out.in_checkpoint_order, layer.reference, out.format);
}

TEST(GptqConvert, V1ZeroOfZeroNeedsFloatZeroPoints) {
  // A v1 stored zero of 15 means a real zero of 16, outside uint4: f16 zero points on f16
  // activations, and a clear refusal on int8 activations.
  GptqLayer layer = make_gptq({4, 64, false, false, false}, 64, 128, 8);
  hm_convert_options_t autogptq;
  hm_convert_options_init(&autogptq);
  autogptq.flags = HM_CONVERT_GPTQ_V1_AUTOGPTQ;
  const Converted f16 = convert(HM_SCHEME_GPTQ, layer.tensors, &autogptq);
  ASSERT_EQ(f16.status, HM_SUCCESS) << f16.error;
  EXPECT_EQ(f16.zero_point_dtype, HM_DTYPE_F16) << f16.format;
  hm_convert_options_t options;
  hm_convert_options_init(&options);
  options.activation = HM_DTYPE_INT8;
  options.flags = HM_CONVERT_GPTQ_V1_AUTOGPTQ;
  const Converted int8 = convert(HM_SCHEME_GPTQ, layer.tensors, &options);
  EXPECT_EQ(int8.status, HM_ERROR_UNSUPPORTED_FORMAT);
  EXPECT_NE(int8.error.find("qzeros"), std::string::npos) << int8.error;
}

TEST(GptqConvert, SymmetricOnEightBitActivations) {
  // uint4b8 g128 is a valid e4m3 / int8 format; the layer converts for both.
  const GptqLayer layer = make_gptq({4, 128, false, true, true}, 64, 256, 9);
  for (hm_dtype_t act : {HM_DTYPE_E4M3, HM_DTYPE_INT8}) {
    hm_convert_options_t options;
    hm_convert_options_init(&options);
    options.activation = act;
    const Converted out = convert(HM_SCHEME_GPTQ, layer.tensors, &options);
    ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
    EXPECT_EQ(out.activation, act);
    expect_bitwise(out.in_checkpoint_order, layer.reference, out.format);
  }
}

TEST(GptqConvert, BiasIsCarried) {
  const GptqLayer layer = make_gptq({4, 64, false, true, false}, 64, 128, 10, true);
  const Converted out = convert(HM_SCHEME_GPTQ, layer.tensors);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  ASSERT_EQ(out.bias.size(), 64u);
  std::vector<float> want(64);
  for (int i = 0; i < 64; ++i) {
    uint16_t h;
    std::memcpy(&h, layer.tensors.back().bytes.data() + 2 * i, 2);
    want[i] = f32(decode(HM_DTYPE_F16, h));
  }
  expect_bitwise(out.bias, want, "bias");
}

// F32 scales on the default f16 activation were rounded saturating and flushing: 1e5 became
// 65504 and 1e-9 became 0 with exit 0. They now take bf16's range, or are refused when f16 was
// asked for.
TEST(GptqConvert, F32ScalesBeyondF16AreNeverSaturatedOrFlushed) {
  GptqLayer layer = make_gptq({4, 64, false, true, false}, 64, 128, 12);
  std::vector<double> s(2 * 64, 0.01);
  s[0] = 1e5;
  s[1] = 1e-9;
  layer.tensors[2] = f32_tensor("model.layers.3.mlp.down_proj.scales", {2, 64}, s);
  const Converted out = convert(HM_SCHEME_GPTQ, layer.tensors);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  EXPECT_EQ(out.activation, HM_DTYPE_BF16) << out.format;
  ASSERT_EQ(out.weight.size(), size_t{64 * 128});
  // Row 0 (scale 1e5) and row 1 (scale 1e-9), group 0: neither saturated nor flushed.
  float top = 0, tiny_top = 0;
  for (int i = 0; i < 64; ++i) {
    top = std::max(top, std::fabs(out.weight[static_cast<size_t>(i)]));
    tiny_top = std::max(tiny_top, std::fabs(out.weight[static_cast<size_t>(128 + i)]));
  }
  EXPECT_GT(top, 65504.0f * 2) << "the 1e5 scale was saturated";
  EXPECT_GT(tiny_top, 0.0f) << "the 1e-9 scale was flushed to 0";

  hm_convert_options_t options;
  hm_convert_options_init(&options);
  options.activation = HM_DTYPE_F16;
  const Converted refused = convert(HM_SCHEME_GPTQ, layer.tensors, &options);
  EXPECT_EQ(refused.status, HM_ERROR_UNSUPPORTED_FORMAT) << refused.format;
  EXPECT_NE(refused.error.find("down_proj.scales"), std::string::npos) << refused.error;
  EXPECT_NE(refused.error.find("100000"), std::string::npos) << refused.error;

  // A scale below f16's range flushes to 0 alone: the same.
  s[0] = 0.01;
  layer.tensors[2] = f32_tensor("model.layers.3.mlp.down_proj.scales", {2, 64}, s);
  const Converted tiny = convert(HM_SCHEME_GPTQ, layer.tensors, &options);
  EXPECT_EQ(tiny.status, HM_ERROR_UNSUPPORTED_FORMAT) << tiny.format;
  EXPECT_NE(tiny.error.find("1e-09"), std::string::npos) << tiny.error;
}

// An F32 bias was written in the f16 output dtype saturating (1e6 -> 65504).
TEST(GptqConvert, BiasBeyondF16OutputIsNeverSaturated) {
  GptqLayer layer = make_gptq({4, 64, false, true, false}, 64, 128, 13, true);
  std::vector<double> b(64, 0.1);
  b[1] = 1e6;
  layer.tensors.back() = f32_tensor("model.layers.3.mlp.down_proj.bias", {64}, b);
  const Converted out = convert(HM_SCHEME_GPTQ, layer.tensors);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  EXPECT_NE(out.format.find("bf16"), std::string::npos) << out.format;
  hm_converted_layer_t* converted = nullptr;
  const std::vector<hm_checkpoint_tensor_t> c = checkpoint_structs(layer.tensors);
  ASSERT_EQ(hm_convert_layer(HM_SCHEME_GPTQ, c.data(), c.size(), nullptr, &converted), HM_SUCCESS);
  hm_format_t* f = nullptr;
  ASSERT_EQ(hm_converted_layer_format(converted, &f), HM_SUCCESS);
  hm_dtype_t output = 0;
  hm_format_get_dtype(f, HM_ROLE_OUTPUT, &output);
  EXPECT_EQ(output, HM_DTYPE_BF16);
  hm_format_destroy(f);
  // The switch is said with the layer, never silent.
  hm_converted_layer_info_t info;
  HM_INIT(hm_converted_layer_info, &info);
  ASSERT_EQ(hm_converted_layer_info(converted, &info), HM_SUCCESS);
  ASSERT_NE(info.note, nullptr);
  EXPECT_NE(std::string(info.note).find("values of the bias that f16 would saturate"),
            std::string::npos)
      << info.note;
  hm_converted_layer_destroy(converted);

  hm_convert_options_t options;
  hm_convert_options_init(&options);
  options.output = HM_DTYPE_F16;
  const Converted refused = convert(HM_SCHEME_GPTQ, layer.tensors, &options);
  EXPECT_EQ(refused.status, HM_ERROR_UNSUPPORTED_FORMAT) << refused.format;
  EXPECT_NE(refused.error.find("down_proj.bias"), std::string::npos) << refused.error;
  EXPECT_NE(refused.error.find("element 1"), std::string::npos) << refused.error;
  EXPECT_NE(refused.error.find("1e+06"), std::string::npos) << refused.error;
}

TEST(GptqConvert, QuantizedFromFloatWeightsStaysClose) {
  // The producing tool's round trip: float weights quantized with act-order (RTN per group, in
  // the quantization order), packed, converted; every weight within half a step of the original.
  const int64_t n = 32, k = 256, g = 64, groups = k / g;
  std::mt19937 rng(11);
  std::normal_distribution<double> nd(0.0, 0.02);
  std::vector<double> w(static_cast<size_t>(n * k));
  for (auto& v : w) v = nd(rng);
  std::vector<int32_t> order(static_cast<size_t>(k)), g_idx(static_cast<size_t>(k));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  for (int64_t i = 0; i < k; ++i) g_idx[order[i]] = static_cast<int32_t>(i / g);
  std::vector<double> scales(static_cast<size_t>(groups * n));
  std::vector<uint32_t> zeros(static_cast<size_t>(groups * n)), q(static_cast<size_t>(n * k));
  for (int64_t col = 0; col < n; ++col)
    for (int64_t gi = 0; gi < groups; ++gi) {
      double lo = 0, hi = 0;
      for (int64_t i = 0; i < k; ++i)
        if (g_idx[i] == gi) lo = std::min(lo, w[col * k + i]), hi = std::max(hi, w[col * k + i]);
      const double s = round_to(HM_DTYPE_F16, (hi - lo) / 15.0);
      const double z = std::min(15.0, std::max(0.0, std::nearbyint(-lo / s)));
      scales[gi * n + col] = s;
      zeros[gi * n + col] = static_cast<uint32_t>(z);
      for (int64_t i = 0; i < k; ++i)
        if (g_idx[i] == gi)
          q[col * k + i] = static_cast<uint32_t>(
              std::min(15.0, std::max(0.0, std::nearbyint(w[col * k + i] / s) + z)));
    }
  std::vector<uint32_t> qweight(static_cast<size_t>(k / 8 * n)), stored(zeros.size());
  for (int64_t col = 0; col < n; ++col) {
    std::vector<uint32_t> line(q.begin() + col * k, q.begin() + (col + 1) * k);
    const auto words = autogptq_pack(line, 4);
    for (size_t r = 0; r < words.size(); ++r) qweight[r * n + col] = words[r];
  }
  for (size_t i = 0; i < zeros.size(); ++i) stored[i] = (zeros[i] - 1) & 15u;  // v1
  std::vector<uint32_t> qzeros;
  for (int64_t gi = 0; gi < groups; ++gi) {
    std::vector<uint32_t> line(stored.begin() + gi * n, stored.begin() + (gi + 1) * n);
    const auto words = autogptq_pack(line, 4);
    qzeros.insert(qzeros.end(), words.begin(), words.end());
  }
  const std::vector<Tensor> tensors = {make_tensor("qweight", "I32", {k / 8, n}, qweight),
                                       make_tensor("qzeros", "I32", {groups, n / 8}, qzeros),
                                       f16_tensor("scales", {groups, n}, scales),
                                       make_tensor("g_idx", "I32", {k}, g_idx)};
  hm_convert_options_t options;
  hm_convert_options_init(&options);
  options.flags = HM_CONVERT_GPTQ_V1_AUTOGPTQ;  // the packing above is AutoGPTQ's
  const Converted out = convert(HM_SCHEME_GPTQ, tensors, &options);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  EXPECT_EQ(out.permutation.size(), static_cast<size_t>(k));
  for (int64_t col = 0; col < n; ++col)
    for (int64_t i = 0; i < k; ++i) {
      const double s = scales[g_idx[i] * n + col];
      // Zero points of 0 would wrap in v1 (the test keeps the quantizer's zeros >= 1 there).
      if (zeros[g_idx[i] * n + col] == 0) continue;
      ASSERT_NEAR(out.in_checkpoint_order[col * k + i], w[col * k + i], 0.5 * s + 1e-7)
          << col << "," << i;
    }
}

TEST(GptqConvert, DerivesBitsWithoutQzerosFromGidx) {
  GptqLayer layer = make_gptq({8, 32, false, true, false}, 32, 64, 12);
  layer.tensors.erase(layer.tensors.begin() + 1);  // no qzeros: symmetric
  const Converted out = convert(HM_SCHEME_GPTQ, layer.tensors);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  EXPECT_EQ(out.weight_dtype, hm::core::Dtype::biased_integer(8).code());
  expect_bitwise(out.in_checkpoint_order, layer.reference, out.format);
}

TEST(GptqConvert, ActOrderRefusals) {
  // KEEP_K_ORDER refuses a non-monotone g_idx; unequal groups cannot be made contiguous.
  GptqLayer layer = make_gptq({4, 32, false, true, true}, 32, 128, 13);
  hm_convert_options_t options;
  hm_convert_options_init(&options);
  options.flags = HM_CONVERT_KEEP_K_ORDER;
  Converted out = convert(HM_SCHEME_GPTQ, layer.tensors, &options);
  EXPECT_EQ(out.status, HM_ERROR_UNSUPPORTED);
  EXPECT_NE(out.error.find("g_idx"), std::string::npos) << out.error;

  std::vector<int32_t> g_idx = layer.g_idx;
  for (auto& g : g_idx)
    if (g == 1) {
      g = 0;
      break;
    }  // group 0 gets 33 columns, group 1 31
  layer.tensors[3] = make_tensor("g_idx", "I32", {128}, g_idx);
  out = convert(HM_SCHEME_GPTQ, layer.tensors);
  EXPECT_EQ(out.status, HM_ERROR_UNSUPPORTED);
  EXPECT_NE(out.error.find("group 0 has 33 columns"), std::string::npos) << out.error;

  g_idx[5] = 99;
  layer.tensors[3] = make_tensor("g_idx", "I32", {128}, g_idx);
  out = convert(HM_SCHEME_GPTQ, layer.tensors);
  EXPECT_EQ(out.status, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(out.error.find("entry 5 is 99"), std::string::npos) << out.error;
}

TEST(GptqConvert, BadTensorsAreNamed) {
  GptqLayer layer = make_gptq({4, 64, false, false, false}, 32, 128, 14);
  // Scales of the wrong shape.
  std::vector<Tensor> t = layer.tensors;
  t[2].shape = {2, 16};
  t[2].bytes.resize(2 * 16 * 2);
  Converted out = convert(HM_SCHEME_GPTQ, t);
  EXPECT_EQ(out.status, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(out.error.find("down_proj.scales"), std::string::npos) << out.error;
  // Wrong dtype.
  t = layer.tensors;
  t[0].dtype = "F32";
  out = convert(HM_SCHEME_GPTQ, t);
  EXPECT_EQ(out.status, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(out.error.find("qweight"), std::string::npos) << out.error;
  // Bytes that do not match the shape.
  t = layer.tensors;
  t[0].bytes.pop_back();
  out = convert(HM_SCHEME_GPTQ, t);
  EXPECT_EQ(out.status, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(out.error.find("bytes do not match"), std::string::npos) << out.error;
  // A tensor that is not a GPTQ role; a missing one.
  t = layer.tensors;
  t.push_back(make_tensor("model.layers.3.mlp.down_proj.weight_packed", "I32", {1},
                          std::vector<int32_t>{0}));
  out = convert(HM_SCHEME_GPTQ, t);
  EXPECT_EQ(out.status, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(out.error.find("weight_packed"), std::string::npos) << out.error;
  t = layer.tensors;
  t.erase(t.begin());
  out = convert(HM_SCHEME_GPTQ, t);
  EXPECT_EQ(out.status, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(out.error.find("'qweight'"), std::string::npos) << out.error;
}

}  // namespace
