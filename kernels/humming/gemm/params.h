// The runtime arguments of the dense GEMM kernels, shared by the host launcher and the device
// code (one definition, so the two sides cannot disagree on the layout; every field has a fixed
// size). Passed by value as the kernel's only parameter.
#pragma once

#if defined(__CUDACC_RTC__)
#include <humming/core/types.cuh>
#else
#include <stdint.h>
#endif

namespace hm::gemm {

struct DenseParams {
  const void* a;        // [m][k] activations, row-major, activation dtype
  const void* w;        // packed weight (docs/layout.md)
  const void* scales;   // packed scales [groups][scale_cols], scale dtype (or null)
  const void* zeros;    // packed zero points [groups][n_pad] (or null)
  const float* global;  // f32 global scale (or null)
  const void* bias;     // [n] output dtype (or null)
  void* c;              // [m][n] output, row-major, output dtype
  float* partials;      // split-K: [splits][m][n_pad] f32 (workspace)
  int32_t* counters;    // split-K: one per output tile, zero on entry, left zero (workspace)
  int64_t m, n, k;      // the real problem
  int64_t n_pad, k_pad;  // the packed weight's padded shape
  int64_t scale_cols;    // columns of the packed scale tensor (n_pad, or n_pad / group_n for blocks)
  int32_t k_chunks_per_split;  // 64-wide K chunks each split handles
  int32_t splits;              // gridDim.z
};

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define HM_PARAMS_HD __host__ __device__
#else
#define HM_PARAMS_HD
#endif

// Weight chunks each warp keeps in flight per strip: a warp waits for its loads once per group
// of this many chunks, so small M (latency bound) wants several; bounded by the registers the
// two buffers of (chunks x strips x bits) words take.
HM_PARAMS_HD constexpr int dense_chunks_in_flight(int warp_strips, int weight_bits) {
  return 16 / (warp_strips * weight_bits) >= 4 ? 4 : 16 / (warp_strips * weight_bits) >= 2 ? 2 : 1;
}

// Dynamic shared memory of a dense mma.sync block: the double-buffered activation tiles
// [2][chunks][block_m][64] of 16-bit values, reused by the epilogue's f32 tile
// [block_m][block_n + 4].
HM_PARAMS_HD constexpr int dense_smem_bytes(int block_m, int block_n, int chunks) {
  return 2 * chunks * block_m * 64 * 2 > block_m * (block_n + 4) * 4
             ? 2 * chunks * block_m * 64 * 2
             : block_m * (block_n + 4) * 4;
}

}  // namespace hm::gemm
