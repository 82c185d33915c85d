// The reference GEMM: C[M,N] = A[M,K] * B[N,K]^T with f32 accumulation, A and B row-major.
// Deliberately plain — one thread per output element, K walked in shared-memory tiles — because it
// is the GPU reference the quantized kernels are checked against: its only job is to be obviously
// right for every shape (any M, N, K, no alignment requirements).
#pragma once

#include <humming/core/types.cuh>

namespace hm::reference {

constexpr int kTile = 16;  // the block is kTile x kTile threads

template <typename In, typename Out>
__device__ __forceinline__ void gemm(const In* __restrict__ a, const In* __restrict__ b,
                                     Out* __restrict__ c, int64 m, int64 n, int64 k) {
  __shared__ float a_tile[kTile][kTile];      // [row of C][k]
  __shared__ float b_tile[kTile][kTile + 1];  // [col of C][k]; +1 avoids bank conflicts on reads
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64 row = static_cast<int64>(blockIdx.y) * kTile + ty;
  const int64 col = static_cast<int64>(blockIdx.x) * kTile + tx;
  const int64 b_row = static_cast<int64>(blockIdx.x) * kTile + ty;  // the B row this thread loads
  float acc = 0.0f;
  for (int64 k0 = 0; k0 < k; k0 += kTile) {
    const int64 kk = k0 + tx;
    a_tile[ty][tx] = (row < m && kk < k) ? to_float(a[row * k + kk]) : 0.0f;
    b_tile[ty][tx] = (b_row < n && kk < k) ? to_float(b[b_row * k + kk]) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kTile; ++i) acc += a_tile[ty][i] * b_tile[tx][i];
    __syncthreads();
  }
  if (row < m && col < n) c[row * n + col] = from_float<Out>(acc);
}

}  // namespace hm::reference

// Defines the extern "C" entry point `name` for one (In, Out) pair. Launch with a
// (ceil(N/16), ceil(M/16)) grid of 16x16 blocks.
#define HM_DEFINE_REFERENCE_GEMM(name, In, Out)                                                \
  extern "C" __global__ void __launch_bounds__(256) name(const In* a, const In* b, Out* c,    \
                                                         ::hm::int64 m, ::hm::int64 n,         \
                                                         ::hm::int64 k) {                      \
    ::hm::reference::gemm<In, Out>(a, b, c, m, n, k);                                          \
  }
