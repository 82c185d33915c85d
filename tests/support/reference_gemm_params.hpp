// Launch parameters of the reference GEMM kernel, shared by the C-API tests (mock driver) and
// the GPU tests that launch it.
#pragma once

#include <cstdint>

#include <gtest/gtest.h>

#include "humming.h"

namespace hm::test {

// C (m x n) = A (m x k) * B (n x k)^T at device memory; the caller destroys the parameters.
inline hm_launch_params_t* reference_gemm_params(uint64_t a, uint64_t b, uint64_t c, int64_t m,
                                                 int64_t n, int64_t k) {
  hm_launch_params_t* p = nullptr;
  EXPECT_EQ(hm_launch_params_create(&p), HM_SUCCESS);
  hm_launch_params_set_pointer(p, HM_ARG_A, a);
  hm_launch_params_set_pointer(p, HM_ARG_B, b);
  hm_launch_params_set_pointer(p, HM_ARG_C, c);
  hm_launch_params_set_int(p, HM_ARG_M, m);
  hm_launch_params_set_int(p, HM_ARG_N, n);
  hm_launch_params_set_int(p, HM_ARG_K, k);
  return p;
}

}  // namespace hm::test
