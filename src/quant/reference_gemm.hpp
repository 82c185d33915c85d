// The host reference GEMM that kernels are checked against: C[M,N] = A[M,K] * W[N,K]^T (+ bias),
// row-major, each dot product accumulated in double (so the result is the exact sum rounded once
// for small integer inputs, and otherwise far more accurate than any kernel).
#pragma once

#include <cstdint>

namespace hm::quant {

// f32 in and out, f64 accumulation; bias may be null. m, n, k >= 0.
void reference_gemm_f32(const float* a, const float* w, const float* bias, float* c, int64_t m,
                        int64_t n, int64_t k);
// The same in f64 end to end (for error bounds measured against the exact product).
void reference_gemm_f64(const double* a, const double* w, const double* bias, double* c, int64_t m,
                        int64_t n, int64_t k);

}  // namespace hm::quant
