// BitNet b1.58: ternary weights packed 4 per byte along N in quarters (as transformers' BitNet
// integration packs them), divided by the per-tensor weight_scale.
#include "test_schema_support.hpp"

namespace {

using namespace schema_test;

struct Bitnet {
  int64_t n = 64, k = 48;
  std::vector<int> w;           // [N][K] in {-1, 0, 1}
  std::vector<uint8_t> packed;  // [N/4][K]
};

Bitnet make_bitnet(uint32_t seed) {
  std::mt19937 rng(seed);
  Bitnet b;
  b.w.resize(static_cast<size_t>(b.n * b.k));
  for (auto& v : b.w) v = static_cast<int>(rng() % 3) - 1;
  const int64_t quarter = b.n / 4;
  b.packed.assign(static_cast<size_t>(quarter * b.k), 0);
  for (int q = 0; q < 4; ++q)  // rows q*quarter .. q*quarter+quarter-1 go to bits 2q
    for (int64_t r = 0; r < quarter; ++r)
      for (int64_t i = 0; i < b.k; ++i)
        b.packed[r * b.k + i] |=
            static_cast<uint8_t>((b.w[(q * quarter + r) * b.k + i] + 1) << (2 * q));
  return b;
}

TEST(BitnetConvert, TernaryDividedByTheScale) {
  const Bitnet b = make_bitnet(80);
  for (double scale : {4.0, 2.71875}) {  // a power of two (exact) and a general bf16 value
    const Converted out = convert(
        HM_SCHEME_BITNET,
        {make_tensor("model.layers.0.mlp.down_proj.weight", "U8", {b.n / 4, b.k}, b.packed),
         f16_tensor("model.layers.0.mlp.down_proj.weight_scale", {1}, {scale}, HM_DTYPE_BF16)});
    ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
    EXPECT_EQ(out.weight_dtype, hm::core::Dtype::biased_integer(2).code()) << out.format;
    EXPECT_EQ(out.scale_kind, HM_SCALE_TENSOR);
    std::vector<float> ref(b.w.size());
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = f32(b.w[i] / scale);
    if (scale == 4.0)
      expect_bitwise(out.weight, ref, out.format);
    else
      expect_within_ulps(out.weight, ref, 1, out.format);
  }
}

TEST(BitnetConvert, ServesOnInt8Activations) {
  const Bitnet b = make_bitnet(81);
  hm_convert_options_t options;
  hm_convert_options_init(&options);
  options.activation = HM_DTYPE_INT8;
  const Converted out = convert(HM_SCHEME_BITNET,
                                {make_tensor("w.weight", "U8", {b.n / 4, b.k}, b.packed),
                                 f32_tensor("w.weight_scale", {1}, {0.5})},
                                &options);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  std::vector<float> ref(b.w.size());
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = f32(b.w[i] * 2.0);
  expect_bitwise(out.weight, ref, out.format);
}

TEST(BitnetConvert, UnequalShardScalesBecomeF32ChannelScales) {
  // A fused layer with one scale per shard (two shards of N / 2 rows): the reciprocals differ, so
  // they become channel scales, kept in f32 (1/3 is exact in no 16-bit float).
  const Bitnet b = make_bitnet(83);
  const double shard_scale[] = {4.0, 3.0};
  const std::vector<Tensor> t = {
      make_tensor("w.weight", "U8", {b.n / 4, b.k}, b.packed),
      f32_tensor("w.weight_scale", {2}, {shard_scale[0], shard_scale[1]})};
  // Without the shard sizes the converter does not guess them.
  const Converted unsized = convert(HM_SCHEME_BITNET, t);
  EXPECT_EQ(unsized.status, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(unsized.error.find("shard-rows"), std::string::npos) << unsized.error;
  const int64_t rows[] = {b.n / 2, b.n / 2};
  hm_convert_options_t options;
  hm_convert_options_init(&options);
  options.shard_rows = rows;
  options.shard_count = 2;
  const Converted out = convert(HM_SCHEME_BITNET, t, &options);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  EXPECT_EQ(out.scale_kind, HM_SCALE_CHANNEL) << out.format;
  EXPECT_EQ(out.scale_dtype, HM_DTYPE_F32) << out.format;
  std::vector<float> ref(b.w.size());
  for (int64_t r = 0; r < b.n; ++r) {
    const double inverse = f32(1.0 / shard_scale[r < b.n / 2 ? 0 : 1]);
    for (int64_t i = 0; i < b.k; ++i) ref[r * b.k + i] = f32(b.w[r * b.k + i] * inverse);
  }
  expect_bitwise(out.weight, ref, out.format);
}

TEST(BitnetConvert, CodeThreeIsRefused) {
  Bitnet b = make_bitnet(82);
  b.packed[3] |= 0xc0;
  const Converted out =
      convert(HM_SCHEME_BITNET, {make_tensor("w.weight", "U8", {b.n / 4, b.k}, b.packed),
                                 f32_tensor("w.weight_scale", {1}, {1.0})});
  EXPECT_EQ(out.status, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(out.error.find("code 3"), std::string::npos) << out.error;
}

}  // namespace
