// hm_quantize / hm_dequantize / hm_reference_gemm_f32 / hm_canonical_weight_init through the C ABI:
// F16 and BF16 sources give what quantizing their exact f32 values gives; argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "humming.h"
#include "support/last_error.hpp"

namespace {

using hm::test::last_error;

struct Canonical {
  std::vector<uint8_t> codes;
  std::vector<float> scales, zero_points, global_scale;
  hm_canonical_weight_t view;
  explicit Canonical(const hm_format_t* f) {
    hm_canonical_sizes_t sizes;
    hm_canonical_sizes_init(&sizes);
    EXPECT_EQ(hm_format_canonical_sizes(f, &sizes), HM_SUCCESS) << last_error();
    codes.resize(sizes.codes);
    scales.resize(sizes.scales);
    zero_points.resize(sizes.zero_points);
    global_scale.resize(sizes.global_scale);
    hm_canonical_weight_init(&view);
    view.codes = codes.data();
    view.scales = scales.empty() ? nullptr : scales.data();
    view.zero_points = zero_points.empty() ? nullptr : zero_points.data();
    view.global_scale = global_scale.empty() ? nullptr : global_scale.data();
  }
};

hm_format_t* make_format() {
  hm_format_t* f = nullptr;
  EXPECT_EQ(hm_format_create(&f), HM_SUCCESS);
  EXPECT_EQ(hm_format_set_dtype(f, HM_ROLE_WEIGHT, HM_DTYPE_UINT4), HM_SUCCESS) << last_error();
  EXPECT_EQ(hm_format_set_dtype(f, HM_ROLE_ZERO_POINT, HM_DTYPE_UINT4), HM_SUCCESS) << last_error();
  EXPECT_EQ(hm_format_set_scale(f, HM_SCALE_GROUP, 32, 0), HM_SUCCESS) << last_error();
  EXPECT_EQ(hm_format_set_shape(f, 6, 80, 2), HM_SUCCESS) << last_error();
  return f;
}

TEST(QuantizeApi, CanonicalWeightInit) {
  hm_canonical_weight_t w;
  std::memset(&w, 0xFF, sizeof w);
  hm_canonical_weight_init(&w);
  EXPECT_EQ(w.struct_size, sizeof w);
  EXPECT_EQ(w.codes, nullptr);
  EXPECT_EQ(w.scales, nullptr);
  EXPECT_EQ(w.zero_points, nullptr);
  EXPECT_EQ(w.global_scale, nullptr);
  hm_canonical_weight_init(nullptr);
}

TEST(QuantizeApi, SixteenBitSourcesEqualTheirF32Values) {
  hm_format_t* f = make_format();
  const size_t count = 2 * 6 * 80;
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  const hm::core::Dtype f16 = hm::core::Dtype::from_code(HM_DTYPE_F16);
  const hm::core::Dtype bf16 = hm::core::Dtype::from_code(HM_DTYPE_BF16);
  for (hm_dtype_t src : {HM_DTYPE_F16, HM_DTYPE_BF16}) {
    const hm::core::Dtype d = src == HM_DTYPE_F16 ? f16 : bf16;
    std::vector<uint16_t> half(count);
    std::vector<float> widened(count);
    for (size_t i = 0; i < count; ++i) {
      half[i] = static_cast<uint16_t>(d.encode(normal(rng)));
      widened[i] = static_cast<float>(d.decode(half[i]));
    }
    Canonical from_half(f), from_f32(f);
    ASSERT_EQ(hm_quantize(f, half.data(), src, &from_half.view), HM_SUCCESS) << last_error();
    ASSERT_EQ(hm_quantize(f, widened.data(), HM_DTYPE_F32, &from_f32.view), HM_SUCCESS) << last_error();
    EXPECT_EQ(from_half.codes, from_f32.codes);
    EXPECT_EQ(from_half.scales, from_f32.scales);
    EXPECT_EQ(from_half.zero_points, from_f32.zero_points);
    std::vector<float> deq(count);
    ASSERT_EQ(hm_dequantize(f, &from_half.view, deq.data()), HM_SUCCESS) << last_error();
    for (size_t i = 0; i < count; ++i) {
      const size_t row = i / 80, group = row * 3 + (i % 80) / 32;  // 3 groups of 32 per row of 80
      ASSERT_LE(std::fabs(deq[i] - widened[i]), from_half.scales[group] * 0.5 * (1 + 1e-6)) << i;
    }
  }
  hm_format_destroy(f);
}

TEST(QuantizeApi, ArgumentChecks) {
  hm_format_t* f = make_format();
  Canonical c(f);
  std::vector<float> w(2 * 6 * 80, 0.5f);
  EXPECT_EQ(hm_quantize(nullptr, w.data(), HM_DTYPE_F32, &c.view), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("'format'"), std::string::npos) << last_error();
  EXPECT_EQ(hm_quantize(f, nullptr, HM_DTYPE_F32, &c.view), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hm_quantize(f, w.data(), HM_DTYPE_F32, nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hm_quantize(f, w.data(), HM_DTYPE_INT8, &c.view), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("src_dtype"), std::string::npos);
  hm_canonical_weight_t bad = c.view;
  bad.struct_size = 0;
  EXPECT_EQ(hm_quantize(f, w.data(), HM_DTYPE_F32, &bad), HM_ERROR_INVALID_STRUCT_SIZE);
  EXPECT_EQ(hm_dequantize(f, &bad, w.data()), HM_ERROR_INVALID_STRUCT_SIZE);
  bad = c.view;
  bad.zero_points = nullptr;
  EXPECT_EQ(hm_quantize(f, w.data(), HM_DTYPE_F32, &bad), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("zero_points"), std::string::npos);
  EXPECT_EQ(hm_dequantize(f, &c.view, nullptr), HM_ERROR_INVALID_ARGUMENT);

  std::vector<uint16_t> half(w.size(), 0x3C00);
  half[1 * 6 * 80 + 4 * 80 + 9] = 0x7E00;  // NaN at expert 1, row 4, column 9
  EXPECT_EQ(hm_quantize(f, half.data(), HM_DTYPE_F16, &c.view), HM_ERROR_NON_FINITE);
  EXPECT_NE(last_error().find("weight[1][4][9]"), std::string::npos) << last_error();
  hm_format_destroy(f);
}

TEST(QuantizeApi, ReferenceGemm) {
  const float a[] = {1, 2, 3, 4, 5, 6};      // [2][3]
  const float w[] = {1, 0, -1, 2, 2, 2};     // [2][3]
  const float bias[] = {10, 20};
  float c[4];
  ASSERT_EQ(hm_reference_gemm_f32(a, w, bias, c, 2, 2, 3), HM_SUCCESS);
  EXPECT_EQ(c[0], 1 - 3 + 10.0f);
  EXPECT_EQ(c[1], 12 + 20.0f);
  EXPECT_EQ(c[2], 4 - 6 + 10.0f);
  EXPECT_EQ(c[3], 30 + 20.0f);
  EXPECT_EQ(hm_reference_gemm_f32(a, w, nullptr, nullptr, 2, 2, 3), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hm_reference_gemm_f32(a, w, nullptr, c, 2, -2, 3), HM_ERROR_INVALID_ARGUMENT);
}

}  // namespace
