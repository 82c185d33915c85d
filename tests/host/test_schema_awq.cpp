// AWQ: qweight / qzeros packed the way AutoAWQ's GEMM packer writes them (8 nibbles per word in the
// column order 0,2,4,6,1,3,5,7), converted, dequantized and compared bit for bit with AWQ's own
// w = (q - zero) * scale.
#include "test_schema_support.hpp"

namespace {

using namespace schema_test;

constexpr int kOrderMap[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// rows x cols 4-bit values -> rows x cols/8 words: nibble i of word c holds column 8c +
// kOrderMap[i].
std::vector<uint32_t> awq_pack(const std::vector<uint32_t>& v, int64_t rows, int64_t cols) {
  std::vector<uint32_t> out(static_cast<size_t>(rows * cols / 8), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols / 8; ++c)
      for (int i = 0; i < 8; ++i)
        out[r * (cols / 8) + c] |= v[r * cols + 8 * c + kOrderMap[i]] << (4 * i);
  return out;
}

struct AwqLayer {
  std::vector<Tensor> tensors;
  std::vector<float> reference;
};

AwqLayer make_awq(int64_t n, int64_t k, int64_t g, uint32_t seed, bool symmetric_zeros = false) {
  std::mt19937 rng(seed);
  const int64_t groups = k / g;
  std::vector<uint32_t> q(static_cast<size_t>(k * n)),
      z(static_cast<size_t>(groups * n));  // [K][N], [G][N]
  for (auto& v : q) v = rng() & 15u;
  for (auto& v : z) v = symmetric_zeros ? 8u : rng() & 15u;
  std::vector<double> s(static_cast<size_t>(groups * n));
  for (auto& v : s)
    v = round_to(HM_DTYPE_F16, std::uniform_real_distribution<double>(1e-3, 0.03)(rng));
  AwqLayer out;
  out.tensors = {
      make_tensor("model.layers.0.self_attn.o_proj.qweight", "I32", {k, n / 8}, awq_pack(q, k, n)),
      make_tensor("model.layers.0.self_attn.o_proj.qzeros", "I32", {groups, n / 8},
                  awq_pack(z, groups, n)),
      f16_tensor("model.layers.0.self_attn.o_proj.scales", {groups, n}, s)};
  out.reference.resize(static_cast<size_t>(n * k));
  for (int64_t c = 0; c < n; ++c)
    for (int64_t i = 0; i < k; ++i) {
      const int64_t gi = i / g;
      out.reference[c * k + i] = f32(
          (static_cast<double>(q[i * n + c]) - static_cast<double>(z[gi * n + c])) * s[gi * n + c]);
    }
  return out;
}

TEST(AwqConvert, DequantizesExactlyLikeAwq) {
  for (int64_t g : {32, 64, 128}) {
    const AwqLayer layer = make_awq(64, 256, g, 20 + static_cast<uint32_t>(g));
    const Converted out = convert(HM_SCHEME_AWQ, layer.tensors);
    ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
    EXPECT_EQ(out.weight_dtype, HM_DTYPE_UINT4) << out.format;
    EXPECT_EQ(out.zero_point_dtype, HM_DTYPE_UINT4) << out.format;
    EXPECT_EQ(out.group_k, g);
    EXPECT_TRUE(out.permutation.empty());
    expect_bitwise(out.weight, layer.reference, out.format);
  }
}

TEST(AwqConvert, AllZerosEightIsSymmetric) {
  const AwqLayer layer = make_awq(32, 128, 128, 21, true);
  const Converted out = convert(HM_SCHEME_AWQ, layer.tensors);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  EXPECT_EQ(out.weight_dtype, HM_DTYPE_UINT4B8) << out.format;
  expect_bitwise(out.weight, layer.reference, out.format);
}

TEST(AwqConvert, WrongNibbleOrderWouldBeCaught) {
  // The test is only as good as its packer: packing in plain order must not match.
  AwqLayer layer = make_awq(32, 128, 64, 22);
  std::vector<uint32_t> words(32 * 128 / 8);
  std::memcpy(words.data(), layer.tensors[0].bytes.data(), words.size() * 4);
  for (auto& w : words) w = (w >> 4) | (w << 28);  // rotate the nibbles
  layer.tensors[0] = make_tensor("qweight", "I32", {128, 4}, words);
  const Converted out = convert(HM_SCHEME_AWQ, layer.tensors);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  EXPECT_NE(out.weight, layer.reference);
}

TEST(AwqConvert, ShapeMismatchNamesTheTensor) {
  AwqLayer layer = make_awq(32, 128, 64, 23);
  layer.tensors[1].shape = {4, 2};  // 8 words but the wrong shape
  const Converted out = convert(HM_SCHEME_AWQ, layer.tensors);
  EXPECT_EQ(out.status, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(out.error.find("o_proj.qzeros"), std::string::npos) << out.error;
}

}  // namespace
