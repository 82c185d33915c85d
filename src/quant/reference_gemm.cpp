#include "quant/reference_gemm.hpp"

#include <string>

#include "core/checked.hpp"
#include "core/error.hpp"

namespace hm::quant {
namespace {

// Returns false when C is empty (nothing to compute: m x 0 would still loop m times).
template <typename In, typename Out>
bool check(const In* a, const In* w, const Out* c, int64_t m, int64_t n, int64_t k) {
  HM_REQUIRE(m >= 0 && n >= 0 && k >= 0, HM_ERROR_INVALID_ARGUMENT,
             "m, n, k must be >= 0, got m=" + std::to_string(m) + " n=" + std::to_string(n) +
                 " k=" + std::to_string(k));
  // Sizes of the three buffers, checked (m * k once wrapped to 0 and let a NULL `a` through).
  const int64_t a_size = core::size_product({m, k, int64_t{sizeof(In)}}, "the bytes of 'a' (m x k)");
  const int64_t w_size = core::size_product({n, k, int64_t{sizeof(In)}}, "the bytes of 'w' (n x k)");
  const int64_t c_size = core::size_product({m, n, int64_t{sizeof(Out)}}, "the bytes of 'c' (m x n)");
  HM_REQUIRE(a_size == 0 || a != nullptr, HM_ERROR_INVALID_ARGUMENT, "argument 'a' is NULL");
  HM_REQUIRE(w_size == 0 || w != nullptr, HM_ERROR_INVALID_ARGUMENT, "argument 'w' is NULL");
  HM_REQUIRE(c_size == 0 || c != nullptr, HM_ERROR_INVALID_ARGUMENT, "argument 'c' is NULL");
  return c_size > 0;
}

// Rows of A and W are both contiguous along K, so each dot product streams two rows. Four
// independent partial sums keep the adds pipelined; their order is fixed, so results are
// deterministic.
template <typename T>
double dot(const T* x, const T* y, int64_t k) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= k; i += 4) {
    s0 += static_cast<double>(x[i]) * static_cast<double>(y[i]);
    s1 += static_cast<double>(x[i + 1]) * static_cast<double>(y[i + 1]);
    s2 += static_cast<double>(x[i + 2]) * static_cast<double>(y[i + 2]);
    s3 += static_cast<double>(x[i + 3]) * static_cast<double>(y[i + 3]);
  }
  for (; i < k; ++i) s0 += static_cast<double>(x[i]) * static_cast<double>(y[i]);
  return (s0 + s1) + (s2 + s3);
}

template <typename T>
void gemm(const T* a, const T* w, const T* bias, T* c, int64_t m, int64_t n, int64_t k) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = dot(a + i * k, w + j * k, k);
      if (bias != nullptr) acc += static_cast<double>(bias[j]);
      c[i * n + j] = static_cast<T>(acc);
    }
  }
}

}  // namespace

void reference_gemm_f32(const float* a, const float* w, const float* bias, float* c, int64_t m,
                        int64_t n, int64_t k) {
  if (check(a, w, c, m, n, k)) gemm(a, w, bias, c, m, n, k);
}

void reference_gemm_f64(const double* a, const double* w, const double* bias, double* c,
                        int64_t m, int64_t n, int64_t k) {
  if (check(a, w, c, m, n, k)) gemm(a, w, bias, c, m, n, k);
}

}  // namespace hm::quant
