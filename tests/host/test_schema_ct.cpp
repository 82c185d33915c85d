// compressed-tensors: pack-quantized (codes packed as compressed-tensors' pack_to_int32 writes
// them: floor(32/b) codes per word, signed values + 2^(b-1), zero points packed along N),
// int-quantized W8A8 and float-quantized FP8 (tensor, channel, group and 128x128 block scales),
// each compared bit for bit with the library's own dequantization (q - zp) * scale.
#include <algorithm>
#include <numeric>

#include "test_schema_support.hpp"

namespace {

using namespace schema_test;

// pack_to_int32: values [rows][cols] (signed, in -2^(b-1)..2^(b-1)-1) -> unsigned + offset,
// floor(32/b) per word along `dim` (1: columns, 0: rows), zero-padded.
std::vector<int32_t> ct_pack(const std::vector<int>& v, int64_t rows, int64_t cols, int bits,
                             int dim) {
  const int64_t f = 32 / bits, offset = 1 << (bits - 1);
  if (dim == 1) {
    const int64_t words = (cols + f - 1) / f;
    std::vector<int32_t> out(static_cast<size_t>(rows * words), 0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        out[r * words + c / f] |= static_cast<int32_t>(
            static_cast<uint32_t>(v[r * cols + c] + offset) << (bits * (c % f)));
    return out;
  }
  const int64_t words = (rows + f - 1) / f;
  std::vector<int32_t> out(static_cast<size_t>(words * cols), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[(r / f) * cols + c] |=
          static_cast<int32_t>(static_cast<uint32_t>(v[r * cols + c] + offset) << (bits * (r % f)));
  return out;
}

struct CtCase {
  int bits;
  int group;  // -1: channel
  bool symmetric;
  bool actorder;
};

struct Built {
  std::vector<Tensor> tensors;
  std::vector<float> reference;
};

Built make_ct_pack(const CtCase& c, int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t g = c.group < 0 ? k : c.group, groups = (k + g - 1) / g;
  const int lo = -(1 << (c.bits - 1)), hi = (1 << (c.bits - 1)) - 1;
  std::vector<int> q(static_cast<size_t>(n * k)), zp(static_cast<size_t>(n * groups), 0);
  for (auto& v : q) v = std::uniform_int_distribution<int>(lo, hi)(rng);
  if (!c.symmetric)
    for (auto& v : zp) v = std::uniform_int_distribution<int>(lo, hi)(rng);
  std::vector<double> s(static_cast<size_t>(n * groups));
  for (auto& v : s)
    v = round_to(HM_DTYPE_BF16, std::uniform_real_distribution<double>(1e-3, 0.05)(rng));
  std::vector<int32_t> g_idx(static_cast<size_t>(k));
  std::vector<int32_t> order(static_cast<size_t>(k));
  std::iota(order.begin(), order.end(), 0);
  if (c.actorder) std::shuffle(order.begin(), order.end(), rng);
  for (int64_t i = 0; i < k; ++i) g_idx[order[i]] = static_cast<int32_t>(i / g);

  Built b;
  const std::string p = "model.layers.1.mlp.up_proj.";
  b.tensors.push_back(make_tensor(p + "weight_packed", "I32",
                                  {n, (k + 32 / c.bits - 1) / (32 / c.bits)},
                                  ct_pack(q, n, k, c.bits, 1)));
  b.tensors.push_back(make_tensor(p + "weight_shape", "I64", {2}, std::vector<int64_t>{n, k}));
  b.tensors.push_back(f16_tensor(p + "weight_scale", {n, groups}, s, HM_DTYPE_BF16));
  if (!c.symmetric)
    b.tensors.push_back(make_tensor(p + "weight_zero_point", "I32",
                                    {(n + 32 / c.bits - 1) / (32 / c.bits), groups},
                                    ct_pack(zp, n, groups, c.bits, 0)));
  if (c.actorder) b.tensors.push_back(make_tensor(p + "weight_g_idx", "I32", {k}, g_idx));
  b.reference.resize(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < k; ++i) {
      const int64_t gi = c.actorder ? g_idx[i] : i / g;
      b.reference[r * k + i] = f32((q[r * k + i] - zp[r * groups + gi]) * s[r * groups + gi]);
    }
  return b;
}

TEST(CompressedTensorsPack, DequantizesExactly) {
  const CtCase cases[] = {{4, 32, true, true},  {4, 128, false, false}, {4, 64, false, true},
                          {8, -1, true, false}, {8, 128, false, false}, {3, 64, false, false},
                          {2, 32, true, false}, {6, 32, false, false}};
  uint32_t seed = 30;
  for (const CtCase& c : cases) {
    const int64_t n = 40, k = 256;  // N not a multiple of the zero-point pack factor: padding
    const Built b = make_ct_pack(c, n, k, seed++);
    const Converted out = convert(HM_SCHEME_CT_PACK, b.tensors);
    const std::string what = "b" + std::to_string(c.bits) + " g" + std::to_string(c.group);
    ASSERT_EQ(out.status, HM_SUCCESS) << what << ": " << out.error;
    expect_bitwise(out.in_checkpoint_order, b.reference, what + " " + out.format);
    if (c.symmetric) {
      EXPECT_EQ(out.weight_dtype, hm::core::Dtype::biased_integer(c.bits).code()) << out.format;
    } else {
      EXPECT_EQ(out.zero_point_dtype, hm::core::Dtype::integer(false, c.bits).code()) << out.format;
    }
    EXPECT_EQ(out.activation, HM_DTYPE_BF16) << "bf16 scales make bf16 the default activation";
    EXPECT_EQ(out.permutation.empty(), !c.actorder || c.group < 0);
  }
}

TEST(CompressedTensorsPack, PartlyFilledLastWordsOfCodesAndZeroPoints) {
  // N = 37 and K = 100 fill the last word of neither the zero points (packed along N) nor the
  // codes (along K) for any width: the codes past N or K must not be read, and 3-, 5-, 6- and
  // 7-bit words keep their top bits unused (codes never cross words, unlike GPTQ's 3-bit stream).
  uint32_t seed = 60;
  for (int bits : {2, 3, 4, 5, 6, 7, 8}) {
    const int64_t n = 37, k = 100;
    const Built b = make_ct_pack({bits, -1, false, false}, n, k, seed++);
    hm_convert_options_t options;
    hm_convert_options_init(&options);
    options.bits = bits;  // 7 bits pack 4 codes a word like 8: the shapes alone say 8
    // The older, word-aligned packing; for 3 bits K = 100 is 10 words in the dense one too.
    options.flags = HM_CONVERT_CT_PACK_WORD_ALIGNED;
    const Converted out = convert(HM_SCHEME_CT_PACK, b.tensors, &options);
    const std::string what = "b" + std::to_string(bits);
    ASSERT_EQ(out.status, HM_SUCCESS) << what << ": " << out.error;
    EXPECT_EQ(out.weight_dtype, hm::core::Dtype::integer(false, bits).code()) << out.format;
    EXPECT_EQ(out.zero_point_dtype, hm::core::Dtype::integer(false, bits).code()) << out.format;
    expect_bitwise(out.weight, b.reference, what + " " + out.format);
  }
}

TEST(CompressedTensorsPack, DerivesBitsAndNeedsThemWithoutShape) {
  Built b = make_ct_pack({4, 64, true, false}, 16, 128, 40);
  b.tensors.erase(b.tensors.begin() + 1);  // no weight_shape
  Converted out = convert(HM_SCHEME_CT_PACK, b.tensors);
  EXPECT_EQ(out.status, HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(out.error.find("pass bits"), std::string::npos) << out.error;
  hm_convert_options_t options;
  hm_convert_options_init(&options);
  options.bits = 4;
  out = convert(HM_SCHEME_CT_PACK, b.tensors, &options);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  expect_bitwise(out.weight, b.reference, out.format);
}

// ---------------------------------------------------------------------------------------------
// int-quantized W8A8

TEST(CompressedTensorsInt8, ChannelTensorAndAsymmetric) {
  const int64_t n = 48, k = 96;
  std::mt19937 rng(41);
  std::vector<int8_t> q(static_cast<size_t>(n * k));
  for (auto& v : q) v = static_cast<int8_t>(std::uniform_int_distribution<int>(-128, 127)(rng));
  std::vector<double> s(static_cast<size_t>(n));
  for (auto& v : s) v = f32(std::uniform_real_distribution<double>(1e-4, 1e-2)(rng));

  // Channel scales, f32, with a static input scale that is ignored.
  std::vector<Tensor> t = {make_tensor("layer.weight", "I8", {n, k}, q),
                           f32_tensor("layer.weight_scale", {n, 1}, s),
                           f32_tensor("layer.input_scale", {1}, {0.02})};
  Converted out = convert(HM_SCHEME_CT_INT8, t);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  EXPECT_EQ(out.weight_dtype, HM_DTYPE_INT8);
  EXPECT_EQ(out.scale_kind, HM_SCALE_CHANNEL);
  std::vector<float> ref(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < k; ++i) ref[r * k + i] = f32(q[r * k + i] * s[r]);
  expect_bitwise(out.weight, ref, out.format);

  // The same weight served with int8 activations.
  hm_convert_options_t options;
  hm_convert_options_init(&options);
  options.activation = HM_DTYPE_INT8;
  out = convert(HM_SCHEME_CT_INT8, t, &options);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  expect_bitwise(out.weight, ref, out.format);

  // One per-tensor scale.
  t[1] = f32_tensor("layer.weight_scale", {1}, {s[0]});
  out = convert(HM_SCHEME_CT_INT8, t);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  EXPECT_EQ(out.scale_kind, HM_SCALE_TENSOR);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < k; ++i) ref[r * k + i] = f32(q[r * k + i] * s[0]);
  expect_bitwise(out.weight, ref, out.format);

  // Asymmetric: int8 zero points per channel.
  std::vector<int8_t> zp(static_cast<size_t>(n));
  for (auto& v : zp) v = static_cast<int8_t>(std::uniform_int_distribution<int>(-20, 20)(rng));
  t[1] = f32_tensor("layer.weight_scale", {n, 1}, s);
  t.push_back(make_tensor("layer.weight_zero_point", "I8", {n, 1}, zp));
  out = convert(HM_SCHEME_CT_INT8, t);
  ASSERT_EQ(out.status, HM_SUCCESS) << out.error;
  EXPECT_EQ(out.weight_dtype, HM_DTYPE_UINT8) << out.format;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < k; ++i) ref[r * k + i] = f32((q[r * k + i] - zp[r]) * s[r]);
  expect_bitwise(out.weight, ref, out.format);
}

// ---------------------------------------------------------------------------------------------
// float-quantized FP8

std::vector<uint8_t> random_e4m3(size_t count, std::mt19937& rng) {
  std::vector<uint8_t> v(count);
  for (auto& c : v) {
    do c = static_cast<uint8_t>(rng());
    while ((c & 0x7f) == 0x7f);  // no NaN codes
  }
  return v;
}

TEST(CompressedTensorsFp8, TensorChannelGroupAndBlockScales) {
  const int64_t n = 200, k = 300;  // neither a multiple of the 128 block
  std::mt19937 rng(42);
  const std::vector<uint8_t> w = random_e4m3(static_cast<size_t>(n * k), rng);
  auto value = [&](int64_t r, int64_t i) { return decode(HM_DTYPE_E4M3, w[r * k + i]); };
  std::uniform_real_distribution<double> sd(1e-4, 3e-3);
  const Tensor weight = make_tensor("m.weight", "F8_E4M3", {n, k}, w);

  struct Layout {
    const char* name;
    std::vector<int64_t> shape;
    int32_t kind;
    int64_t rows_per_scale, cols_per_scale;
  };
  const Layout layouts[] = {{"tensor", {1}, HM_SCALE_TENSOR, n, k},
                            {"channel", {n, 1}, HM_SCALE_CHANNEL, 1, k},
                            {"group", {n, 5}, HM_SCALE_GROUP, 1, 64},
                            {"block", {2, 3}, HM_SCALE_BLOCK, 128, 128}};
  for (const Layout& l : layouts) {
    int64_t count = 1;
    for (int64_t d : l.shape) count *= d;
    std::vector<double> s(static_cast<size_t>(count));
    for (auto& v : s) v = f32(sd(rng));
    const int64_t cols = l.kind == HM_SCALE_TENSOR ? 1 : l.shape[1];
    auto scale_of = [&](int64_t r, int64_t i) {
      return l.kind == HM_SCALE_TENSOR ? s[0]
                                       : s[(r / l.rows_per_scale) * cols + i / l.cols_per_scale];
    };
    const std::vector<Tensor> t = {weight, f32_tensor("m.weight_scale", l.shape, s)};
    // e4m3 activations: every scale kept in f32, exact.
    hm_convert_options_t options;
    hm_convert_options_init(&options);
    options.activation = HM_DTYPE_E4M3;
    options.group_size = l.kind == HM_SCALE_GROUP ? 64 : 0;
    Converted out = convert(HM_SCHEME_CT_FP8, t, &options);
    ASSERT_EQ(out.status, HM_SUCCESS) << l.name << ": " << out.error;
    EXPECT_EQ(out.scale_kind, l.kind) << out.format;
    std::vector<float> ref(static_cast<size_t>(n * k));
    for (int64_t r = 0; r < n; ++r)
      for (int64_t i = 0; i < k; ++i) ref[r * k + i] = f32(value(r, i) * scale_of(r, i));
    expect_bitwise(out.weight, ref, std::string(l.name) + " " + out.format);

    // The default (bf16) activation: tensor and channel scales stay f32; group and block scales
    // are applied in bf16, so they are rounded to bf16 first (docs/convert.md) - exactly that.
    options.activation = HM_DTYPE_NONE;
    out = convert(HM_SCHEME_CT_FP8, t, &options);
    ASSERT_EQ(out.status, HM_SUCCESS) << l.name << ": " << out.error;
    EXPECT_EQ(out.activation, HM_DTYPE_BF16);
    const bool rounded = l.kind == HM_SCALE_GROUP || l.kind == HM_SCALE_BLOCK;
    for (int64_t r = 0; r < n; ++r)
      for (int64_t i = 0; i < k; ++i) {
        const double sc = rounded ? round_to(HM_DTYPE_BF16, scale_of(r, i)) : scale_of(r, i);
        ref[r * k + i] = f32(value(r, i) * sc);
      }
    expect_bitwise(out.weight, ref, std::string(l.name) + " bf16 " + out.format);
  }
}

TEST(CompressedTensorsFp8, NanCodesAreRefused) {
  std::vector<uint8_t> w(16 * 32, 0x38);
  w[77] = 0xff;
  const Converted out = convert(HM_SCHEME_CT_FP8, {make_tensor("x.weight", "F8_E4M3", {16, 32}, w),
                                                   f32_tensor("x.weight_scale", {1}, {0.5})});
  EXPECT_EQ(out.status, HM_ERROR_NON_FINITE);
  EXPECT_NE(out.error.find("element 77"), std::string::npos) << out.error;
}

}  // namespace
