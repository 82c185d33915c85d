// quant::quantize_activation: the scale rule per dtype, the 4-bit packing (even k in the low
// nibble), per-token and per-group scales with a partial last group, and the nearest-code bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "quant/activation.hpp"

namespace hm::quant {
namespace {

using core::Dtype;

TEST(ActivationQuant, ScaleRulePackingAndNearestCodes) {
  const struct {
    const char* dtype;
    double qmax;
  } cases[] = {{"e4m3", 448}, {"e5m2", 57344}, {"int8", 127}, {"int4", 7}, {"e2m1", 6}};
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (const auto& c : cases) {
    for (int64_t group_k : {0, 32, 48}) {
      const Dtype d = Dtype::parse(c.dtype);
      SCOPED_TRACE(std::string(c.dtype) + " group_k=" + std::to_string(group_k));
      const int64_t m = 5, k = 101;  // odd k: a pad nibble; 101 = 3 * 32 + 5: a partial group
      std::vector<float> a(m * k);
      for (float& v : a) v = normal(rng);
      for (int64_t j = 0; j < k; ++j) a[2 * k + j] = 0.0f;  // a zero row
      const int64_t row_bytes = activation_row_bytes(d, k), groups = activation_groups(k, group_k);
      EXPECT_EQ(row_bytes, d.bits() == 8 ? k : (k + 1) / 2);
      std::vector<uint8_t> codes(m * row_bytes, 0xAB);
      std::vector<float> scales(m * groups, -1.0f);
      quantize_activation(d, a.data(), m, k, group_k, codes.data(), scales.data());
      std::vector<float> back(m * k);
      dequantize_activation(d, codes.data(), scales.data(), m, k, group_k, back.data());
      const int64_t gk = group_k > 0 ? group_k : k;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t g = 0; g < groups; ++g) {
          float absmax = 0;
          for (int64_t j = g * gk; j < std::min(k, (g + 1) * gk); ++j)
            absmax = std::max(absmax, std::fabs(a[i * k + j]));
          const float expected = absmax > 0 ? static_cast<float>(absmax / c.qmax) : 1.0f;
          ASSERT_EQ(scales[i * groups + g], expected);
        }
        for (int64_t j = 0; j < k; ++j) {
          const uint8_t byte = codes[i * row_bytes + (d.bits() == 8 ? j : j / 2)];
          const uint32_t code = d.bits() == 8 ? byte : (j % 2 == 0 ? byte & 0xF : byte >> 4);
          const double s = scales[i * groups + j / gk];
          // The quotient is an f32 division (the rule the GPU quantizer shares).
          const float q = a[i * k + j] / scales[i * groups + j / gk];
          ASSERT_EQ(code, d.encode(static_cast<double>(q))) << i << "," << j;
          ASSERT_EQ(back[i * k + j], static_cast<float>(d.decode(code) * s));
          // Half a step of the dtype at a / s (the scale's f32 rounding adds at most 1e-6).
          const double x = a[i * k + j] / s;
          const double half_step =
              d.is_integer() ? 0.5
                             : std::max(std::ldexp(std::fabs(x), -(d.mantissa_bits() + 1)),
                                        std::ldexp(1.0, -d.exponent_bias() - d.mantissa_bits()));
          ASSERT_LE(std::fabs(a[i * k + j] - back[i * k + j]), s * half_step * (1 + 1e-6));
        }
        if (d.bits() == 4) {
          ASSERT_EQ(codes[i * row_bytes + row_bytes - 1] >> 4, 0) << "pad nibble";
        }
      }
      for (int64_t j = 0; j < row_bytes; ++j) ASSERT_EQ(codes[2 * row_bytes + j], 0) << "zero row";
    }
  }
}

TEST(ActivationQuant, KnownPacking) {
  const Dtype int4 = Dtype::parse("int4");
  const float a[] = {7, -7, 1, -1, 0};  // absmax 7: scale 1
  uint8_t codes[3];
  float scale;
  quantize_activation(int4, a, 1, 5, 0, codes, &scale);
  EXPECT_EQ(scale, 1.0f);
  EXPECT_EQ(codes[0], 0x97);  // k=0: 7 (low), k=1: -7 = 0x9 (high)
  EXPECT_EQ(codes[1], 0xF1);
  EXPECT_EQ(codes[2], 0x00);
}

TEST(ActivationQuant, NonFiniteGroupsGetANanScaleAndZeroCodes) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Groups of 4: [1 2 NaN 4] [5 -inf 7 8] [9 10 11 12]
  const float a[12] = {1, 2, nan, 4, 5, -inf, 7, 8, 9, 10, 11, 12};
  for (const char* dtype : {"e4m3", "e5m2", "int8", "int4", "e2m1"}) {
    SCOPED_TRACE(dtype);
    const Dtype d = Dtype::parse(dtype);
    std::vector<uint8_t> codes(activation_row_bytes(d, 12), 0xAB);
    float scales[3];
    quantize_activation(d, a, 1, 12, 4, codes.data(), scales);
    uint32_t bits[2];
    std::memcpy(&bits[0], &scales[0], 4);
    std::memcpy(&bits[1], &scales[1], 4);
    EXPECT_EQ(bits[0], 0x7FC00000u);
    EXPECT_EQ(bits[1], 0x7FC00000u);
    EXPECT_EQ(scales[2], 12.0f / static_cast<float>(d.max_value()));
    const int64_t finite_from = d.bits() == 8 ? 8 : 4;  // the third group's first byte
    for (int64_t j = 0; j < finite_from; ++j) EXPECT_EQ(codes[j], 0) << j;
    EXPECT_NE(codes[finite_from], 0);
  }
}

TEST(ActivationQuant, Rejections) {
  float a[4] = {1, 2, 3, 4};
  uint8_t codes[4];
  float scales[1];
  for (const char* bad : {"f16", "uint8", "e3m2", "uint4b8"}) {
    try {
      quantize_activation(Dtype::parse(bad), a, 1, 2, 0, codes, scales);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), HM_ERROR_UNSUPPORTED_FORMAT);
    }
  }
  try {
    quantize_activation(Dtype::parse("int8"), a, 1, 2, -1, codes, scales);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_INVALID_ARGUMENT);
  }
}

TEST(ActivationQuant, DequantizeChecksItsArgumentsLikeQuantize) {
  uint8_t codes[4] = {0x21, 0x43, 0, 0};  // int4: k = 0..3 hold 1, 2, 3, 4
  float scales[2] = {1.0f, 2.0f};
  float out[4];
  auto status_of = [&](const char* dtype, const uint8_t* c, const float* s, int64_t m,
                       int64_t group_k, float* o) {
    try {
      dequantize_activation(Dtype::parse(dtype), c, s, m, 4, group_k, o);
      return HM_SUCCESS;
    } catch (const Error& e) {
      return e.status();
    }
  };
  EXPECT_EQ(status_of("int4", codes, scales, 1, 2, out), HM_SUCCESS);  // groups of 2 columns
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 2.0f);
  EXPECT_EQ(out[2], 6.0f);
  EXPECT_EQ(out[3], 8.0f);
  EXPECT_EQ(status_of("f16", codes, scales, 1, 0, out), HM_ERROR_UNSUPPORTED_FORMAT);
  EXPECT_EQ(status_of("int8", codes, scales, 1, -1, out), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of("int8", codes, scales, -1, 0, out), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of("int8", codes, scales, 1, 0, nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of("int8", nullptr, scales, 1, 0, out), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of("int8", codes, nullptr, 1, 0, out), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of("int8", nullptr, nullptr, 0, 0, nullptr), HM_SUCCESS);  // nothing to read
}

}  // namespace
}  // namespace hm::quant
