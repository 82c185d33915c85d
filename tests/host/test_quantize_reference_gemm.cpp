// quant::reference_gemm_*: exact on small integers (against an int64 loop), bias, empty shapes
// and argument checks.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "quant/reference_gemm.hpp"

namespace hm::quant {
namespace {

TEST(ReferenceGemm, ExactOnSmallIntegers) {
  std::mt19937_64 rng(9);
  std::uniform_int_distribution<int> small(-8, 7);
  for (int64_t m : {1, 3, 17}) {
    for (int64_t n : {1, 5, 33}) {
      for (int64_t k : {1, 7, 130}) {
        std::vector<float> a(m * k), w(n * k), bias(n), c(m * n);
        std::vector<double> ad(m * k), wd(n * k), biasd(n), cd(m * n);
        for (size_t i = 0; i < a.size(); ++i) ad[i] = a[i] = static_cast<float>(small(rng));
        for (size_t i = 0; i < w.size(); ++i) wd[i] = w[i] = static_cast<float>(small(rng));
        for (size_t i = 0; i < bias.size(); ++i) biasd[i] = bias[i] = static_cast<float>(small(rng) * 100);
        reference_gemm_f32(a.data(), w.data(), bias.data(), c.data(), m, n, k);
        reference_gemm_f64(ad.data(), wd.data(), biasd.data(), cd.data(), m, n, k);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            int64_t expected = static_cast<int64_t>(bias[j]);
            for (int64_t x = 0; x < k; ++x)
              expected += static_cast<int64_t>(a[i * k + x]) * static_cast<int64_t>(w[j * k + x]);
            ASSERT_EQ(c[i * n + j], static_cast<float>(expected)) << m << "x" << n << "x" << k;
            ASSERT_EQ(cd[i * n + j], static_cast<double>(expected));
          }
        }
        // Without bias.
        reference_gemm_f32(a.data(), w.data(), nullptr, c.data(), m, n, k);
        for (int64_t j = 0; j < n; ++j) {
          int64_t expected = 0;
          for (int64_t x = 0; x < k; ++x)
            expected += static_cast<int64_t>(a[x]) * static_cast<int64_t>(w[j * k + x]);
          ASSERT_EQ(c[j], static_cast<float>(expected));
        }
      }
    }
  }
}

TEST(ReferenceGemm, AccumulatesInDouble) {
  // 2^24 + 1 - 2^24 is 1 in double, 0 in a float accumulator.
  const float a[] = {1, 1, 1}, w[] = {16777216.0f, 1.0f, -16777216.0f};
  float c = -1;
  reference_gemm_f32(a, w, nullptr, &c, 1, 1, 3);
  EXPECT_EQ(c, 1.0f);
}

TEST(ReferenceGemm, EmptyShapesAndBadArguments) {
  float c[4] = {5, 5, 5, 5};
  reference_gemm_f32(nullptr, nullptr, nullptr, c, 2, 2, 0);  // k = 0: C = bias (none) = 0
  for (float v : c) EXPECT_EQ(v, 0.0f);
  reference_gemm_f32(nullptr, nullptr, nullptr, nullptr, 0, 0, 0);
  const float a[2] = {1, 2};
  try {
    reference_gemm_f32(a, nullptr, nullptr, c, 1, 1, 2);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(e.message().find("'w'"), std::string::npos);
  }
  try {
    reference_gemm_f32(a, a, nullptr, c, -1, 1, 2);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_INVALID_ARGUMENT);
  }
}

}  // namespace
}  // namespace hm::quant
