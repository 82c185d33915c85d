// The reference GEMM kernel on a real GPU, through the public API (JIT, cache, driver launch),
// against the f64 host reference. Skipped (exit 77, see tests/support/gpu_main.cpp) without a GPU.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/support/dense_layer.hpp"
#include "humming.h"
#include "support/reference_gemm_params.hpp"

namespace {

using hm::gpu_test::Gpu;  // a context on device 0
using hm::gpu_test::last_error;

size_t elem_bytes(hm_dtype_t d) { return d == HM_DTYPE_F32 ? 4 : 2; }

// Host values -> dtype bit patterns (and the values those patterns hold).
std::vector<uint8_t> encode(hm_dtype_t d, std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * elem_bytes(d));
  for (size_t i = 0; i < values.size(); ++i) {
    if (d == HM_DTYPE_F32) {
      std::memcpy(&bytes[i * 4], &values[i], 4);
      continue;
    }
    uint32_t code = 0;
    double back = 0;
    hm_dtype_encode(d, values[i], &code);
    hm_dtype_decode(d, code, &back);
    values[i] = static_cast<float>(back);
    uint16_t c16 = static_cast<uint16_t>(code);
    std::memcpy(&bytes[i * 2], &c16, 2);
  }
  return bytes;
}

std::vector<double> decode(hm_dtype_t d, const std::vector<uint8_t>& bytes, size_t count) {
  std::vector<double> out(count);
  for (size_t i = 0; i < count; ++i) {
    if (d == HM_DTYPE_F32) {
      float f;
      std::memcpy(&f, &bytes[i * 4], 4);
      out[i] = f;
    } else {
      uint16_t c16;
      std::memcpy(&c16, &bytes[i * 2], 2);
      hm_dtype_decode(d, c16, &out[i]);
    }
  }
  return out;
}

// Runs C = A * B^T on the GPU and returns C as doubles.
std::vector<double> run(Gpu& gpu, hm_dtype_t in, hm_dtype_t out, std::vector<float>& a,
                        std::vector<float>& b, int64_t m, int64_t n, int64_t k) {
  hm_kernel_t* kernel = nullptr;
  EXPECT_EQ(hm_kernel_create_reference_gemm(gpu.ctx, in, out, &kernel), HM_SUCCESS) << last_error();
  auto ab = encode(in, a), bb = encode(in, b);
  const size_t c_bytes = static_cast<size_t>(m * n) * elem_bytes(out);
  uint64_t da = 0, db = 0, dc = 0;
  EXPECT_EQ(hm_device_alloc(gpu.ctx, ab.size(), &da), HM_SUCCESS);
  EXPECT_EQ(hm_device_alloc(gpu.ctx, bb.size(), &db), HM_SUCCESS);
  EXPECT_EQ(hm_device_alloc(gpu.ctx, c_bytes, &dc), HM_SUCCESS);
  hm_copy_to_device(gpu.ctx, da, ab.data(), ab.size());
  hm_copy_to_device(gpu.ctx, db, bb.data(), bb.size());
  // Poison C so an unwritten element cannot pass.
  std::vector<uint8_t> poison(c_bytes, 0xFF);
  hm_copy_to_device(gpu.ctx, dc, poison.data(), c_bytes);
  hm_launch_params_t* p = hm::test::reference_gemm_params(da, db, dc, m, n, k);
  EXPECT_EQ(hm_kernel_launch(kernel, p, nullptr), HM_SUCCESS) << last_error();
  EXPECT_EQ(hm_stream_synchronize(gpu.ctx, nullptr), HM_SUCCESS) << last_error();
  std::vector<uint8_t> cb(c_bytes);
  hm_copy_to_host(gpu.ctx, cb.data(), dc, c_bytes);
  hm_launch_params_destroy(p);
  hm_device_free(gpu.ctx, da);
  hm_device_free(gpu.ctx, db);
  hm_device_free(gpu.ctx, dc);
  hm_kernel_destroy(kernel);
  return decode(out, cb, static_cast<size_t>(m * n));
}

std::vector<double> host_reference(const std::vector<float>& a, const std::vector<float>& b,
                                   int64_t m, int64_t n, int64_t k) {
  std::vector<double> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t l = 0; l < k; ++l) s += static_cast<double>(a[i * k + l]) * b[j * k + l];
      c[i * n + j] = s;
    }
  return c;
}

struct Shape {
  int64_t m, n, k;
};

class ReferenceGemm : public testing::TestWithParam<std::tuple<hm_dtype_t, hm_dtype_t>> {};

// Random inputs; relative Frobenius error bounded by the output rounding (f32 accumulation:
// ~1e-6; f16/bf16 outputs: half an ulp of the output, 2^-11 / 2^-8 relative).
TEST_P(ReferenceGemm, MatchesHostReferenceOnRaggedShapes) {
  auto [in, out] = GetParam();
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  const double bound = out == HM_DTYPE_F32 ? 1e-5 : out == HM_DTYPE_F16 ? 1e-3 : 8e-3;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (Shape s : {Shape{1, 1, 1}, Shape{3, 17, 33}, Shape{17, 64, 128}, Shape{64, 100, 7392},
                  Shape{129, 257, 31}}) {
    std::vector<float> a(static_cast<size_t>(s.m * s.k)), b(static_cast<size_t>(s.n * s.k));
    for (auto& x : a) x = normal(rng);
    for (auto& x : b) x = normal(rng);
    auto got = run(gpu, in, out, a, b, s.m, s.n, s.k);
    auto ref = host_reference(a, b, s.m, s.n, s.k);
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << "element " << i << " not written or not finite";
      num += (got[i] - ref[i]) * (got[i] - ref[i]);
      den += ref[i] * ref[i];
    }
    EXPECT_LE(std::sqrt(num / den), bound) << "m=" << s.m << " n=" << s.n << " k=" << s.k;
  }
}

// Small integers: every product and partial sum is exact in f32 and the result exact in the
// output type, so any indexing mistake shows as a bit difference.
TEST_P(ReferenceGemm, ExactOnSmallIntegers) {
  auto [in, out] = GetParam();
  Gpu gpu;
  ASSERT_NE(gpu.ctx, nullptr);
  const int64_t m = 19, n = 23, k = 28;  // |sum| <= 28 * 9 = 252: exact even in bf16
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> small(-3, 3);
  std::vector<float> a(m * k), b(n * k);
  for (auto& x : a) x = static_cast<float>(small(rng));
  for (auto& x : b) x = static_cast<float>(small(rng));
  auto got = run(gpu, in, out, a, b, m, n, k);
  auto ref = host_reference(a, b, m, n, k);
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(got[i], ref[i]) << "element " << i;
}

std::string pair_name(const testing::TestParamInfo<ReferenceGemm::ParamType>& info) {
  char in[16];
  char out[16];
  hm_dtype_name(std::get<0>(info.param), in, sizeof in, nullptr);
  hm_dtype_name(std::get<1>(info.param), out, sizeof out, nullptr);
  return std::string(in) + "_to_" + out;
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, ReferenceGemm,
    testing::Combine(testing::Values(HM_DTYPE_F16, HM_DTYPE_BF16, HM_DTYPE_F32),
                     testing::Values(HM_DTYPE_F16, HM_DTYPE_BF16, HM_DTYPE_F32)),
    pair_name);

}  // namespace
