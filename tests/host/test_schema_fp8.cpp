// HF "fp8" checkpoints: e4m3 weights with weight_scale_inv 128x128 blocks (DeepSeek-V3 style), and
// per-tensor weight_scale with fused QKV shards (one scalar per shard -> channel scales).
#include "test_schema_support.hpp"

namespace {

using namespace schema_test;

std::vector<uint8_t> random_e4m3(size_t count, std::mt19937& rng) {
  std::vector<uint8_t> v(count);
  for (auto& c : v) {
    do c = static_cast<uint8_t>(rng());
    while ((c & 0x7f) == 0x7f);
  }
  return v;
}

TEST(Fp8Convert, BlockScalesExactOnE4m3Activations) {
  const int64_t n = 256, k = 384;
  std::mt19937 rng(50);
  const std::vector<uint8_t> w = random_e4m3(static_cast<size_t>(n * k), rng);
  std::vector<double> s(2 * 3);
  for (auto& v : s) v = f32(std::uniform_real_distribution<double>(1e-4, 1e-2)(rng));
  const std::vector<Tensor> t = {
      make_tensor("model.layers.0.mlp.gate_proj.weight", "F8_E4M3", {n, k}, w),
      f32_tensor("model.layers.0.mlp.gate_proj.weight_scale_inv", {2, 3}, s)};
  hm_convert_options_t options;
  hm_convert_options_init(&options);
  options.activation = HM_DTYPE_E4M3;
  const Converted out = convert(HM_SCHEME_FP8, t, &options);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  EXPECT_EQ(out.scale_kind, HM_SCALE_BLOCK);
  EXPECT_EQ(out.group_k, 128);
  EXPECT_EQ(out.group_n, 128);
  EXPECT_EQ(out.scale_dtype, HM_DTYPE_F32);
  std::vector<float> ref(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < k; ++i)
      ref[r * k + i] = f32(decode(HM_DTYPE_E4M3, w[r * k + i]) * s[(r / 128) * 3 + i / 128]);
  expect_bitwise(out.weight, ref, out.format);
}

TEST(Fp8Convert, FusedQkvShardScalesBecomeChannelScales) {
  const int64_t q = 64, kv = 16, n = q + 2 * kv, k = 64;
  std::mt19937 rng(51);
  const std::vector<uint8_t> w = random_e4m3(static_cast<size_t>(n * k), rng);
  const std::vector<double> s = {f32(0.0123), f32(0.0071), f32(0.0309)};
  std::vector<Tensor> t = {
      make_tensor("model.layers.0.self_attn.qkv_proj.weight", "F8_E4M3", {n, k}, w),
      f32_tensor("model.layers.0.self_attn.qkv_proj.weight_scale", {3}, s),
      f32_tensor("model.layers.0.self_attn.qkv_proj.input_scale", {3}, {1, 1, 1})};
  // Without the shard sizes N = 96 splits evenly into 3, which is wrong for this layer and
  // must not be what the caller gets when they pass the real sizes.
  const int64_t rows[] = {q, kv, kv};
  hm_convert_options_t options;
  hm_convert_options_init(&options);
  options.shard_rows = rows;
  options.shard_count = 3;
  const Converted out = convert(HM_SCHEME_FP8, t, &options);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  EXPECT_EQ(out.scale_kind, HM_SCALE_CHANNEL);
  std::vector<float> ref(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r) {
    const double sc = r < q ? s[0] : r < q + kv ? s[1] : s[2];
    for (int64_t i = 0; i < k; ++i) ref[r * k + i] = f32(decode(HM_DTYPE_E4M3, w[r * k + i]) * sc);
  }
  expect_bitwise(out.weight, ref, out.format);

  // Shard sizes that do not add up are refused; equal scales collapse to one tensor scale.
  const int64_t bad[] = {q, kv, kv + 1};
  options.shard_rows = bad;
  Converted refused = convert(HM_SCHEME_FP8, t, &options);
  EXPECT_EQ(refused.status, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(refused.error.find("qkv_proj.weight_scale"), std::string::npos) << refused.error;
  t[1] = f32_tensor("model.layers.0.self_attn.qkv_proj.weight_scale", {3}, {s[0], s[0], s[0]});
  const Converted uniform = convert(HM_SCHEME_FP8, t);
  ASSERT_EQ(uniform.status, HM_SUCCESS) << uniform.error;
  EXPECT_EQ(uniform.scale_kind, HM_SCALE_TENSOR);
  for (int64_t i = 0; i < n * k; ++i) ref[i] = f32(decode(HM_DTYPE_E4M3, w[i]) * s[0]);
  expect_bitwise(uniform.weight, ref, uniform.format);
}

// Compressed-tensors block FP8 stores its [ceil(N/128), ceil(K/128)] block scales under
// `weight_scale`: they were read as one scale per fused shard, spread over row bands (wrong
// weights, no error).
TEST(Fp8Convert, BlockScalesUnderWeightScaleAreBlockScales) {
  const int64_t n = 256, k = 256;
  std::mt19937 rng(52);
  const std::vector<uint8_t> w = random_e4m3(static_cast<size_t>(n * k), rng);
  const std::vector<double> s = {1.0, 2.0, 4.0, 8.0};
  const Converted out =
      convert(HM_SCHEME_FP8, {make_tensor("l.weight", "F8_E4M3", {n, k}, w),
                              f32_tensor("l.weight_scale", {2, 2}, s)});
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  EXPECT_EQ(out.scale_kind, HM_SCALE_BLOCK);
  std::vector<float> ref(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < k; ++i)
      ref[r * k + i] = f32(decode(HM_DTYPE_E4M3, w[r * k + i]) * s[(r / 128) * 2 + i / 128]);
  expect_bitwise(out.weight, ref, out.format);

  // A 2-D weight_scale of no known layout is refused, naming it and its shape.
  const Converted odd =
      convert(HM_SCHEME_FP8, {make_tensor("l.weight", "F8_E4M3", {n, k}, w),
                              f32_tensor("l.weight_scale", {2, 3}, {1, 2, 3, 4, 5, 6})});
  EXPECT_NE(odd.status, HM_SUCCESS);
  EXPECT_NE(odd.error.find("l.weight_scale"), std::string::npos) << odd.error;
  EXPECT_NE(odd.error.find("[2, 3]"), std::string::npos) << odd.error;
}

// Unequal shard scales without shard_rows were spread over N / S rows each: a guess that is wrong
// for GQA's q/k/v.
TEST(Fp8Convert, UnequalShardScalesNeedShardRows) {
  const int64_t n = 96, k = 64;
  std::mt19937 rng(53);
  const std::vector<uint8_t> w = random_e4m3(static_cast<size_t>(n * k), rng);
  const Converted out =
      convert(HM_SCHEME_FP8, {make_tensor("l.weight", "F8_E4M3", {n, k}, w),
                              f32_tensor("l.weight_scale", {3, 1}, {0.5, 0.25, 0.125})});
  EXPECT_EQ(out.status, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(out.error.find("l.weight_scale"), std::string::npos) << out.error;
  EXPECT_NE(out.error.find("shard-rows"), std::string::npos) << out.error;
}

TEST(Fp8Convert, NeedsExactlyOneScale) {
  std::vector<uint8_t> w(32 * 32, 0x30);
  const Converted out = convert(HM_SCHEME_FP8, {make_tensor("x.weight", "F8_E4M3", {32, 32}, w)});
  EXPECT_EQ(out.status, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(out.error.find("weight_scale_inv"), std::string::npos) << out.error;
}

}  // namespace
