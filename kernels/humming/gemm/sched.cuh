// Schedulers: which output tile, K range and expert a block works on, and which rows of A and C
// the tile's rows are. The GEMM templates ask only these, so a dense GEMM (rows are tokens) and
// an indexed MoE GEMM (rows are routed assignments, gathered from A and scattered into C) share
// one mainloop and one epilogue. Grid: x = channel blocks, y = token blocks, z = K splits (one
// thread-block cluster with cluster split-K).
#pragma once

#include <humming/core/types.cuh>
#include <humming/gemm/params.h>

namespace hm::gemm {

struct BlockWork {
  int64_t m0;                // the tile's first row (dense: token; MoE: slot of sorted_ids)
  int64_t strip0;            // the tile's first 16-channel strip
  int64_t kc_begin, kc_end;  // the K steps of this split (never empty; params.h)
  int64_t expert;            // MoE: the expert of the rows; dense: 0. -1: the block has no work
};

// kStrips: 16-channel strips per block; kBlockM: rows per block. C::kMoe selects the indexed
// MoE schedule.
template <class C, int kStrips>
__device__ __forceinline__ BlockWork block_work(const DenseParams& p) {
  BlockWork w;
  w.strip0 = static_cast<int64_t>(blockIdx.x) * kStrips;
  w.m0 = static_cast<int64_t>(blockIdx.y) * C::kBlockM;
  // K steps of the kernel: 64-wide chunks, or 128 k for the wgmma kernel's 8-bit activations
  // (params.h; a last step may hold one real chunk).
  constexpr int kStepK = dense_wgmma_step_k(C::kActBits);
  const int64_t k_chunks = (p.k_pad + kStepK - 1) / kStepK;
  w.kc_begin = static_cast<int64_t>(blockIdx.z) * p.k_chunks_per_split;
  w.kc_end = w.kc_begin + p.k_chunks_per_split < k_chunks ? w.kc_begin + p.k_chunks_per_split
                                                          : k_chunks;
  w.expert = 0;
  if constexpr (C::kMoe) {
    // Every block of a cluster (same x and y) reaches the same answer, so a cluster leaves
    // together or not at all. The counts are device data: read, never trusted as bounds.
    if (w.m0 >= static_cast<int64_t>(*p.num_padded)) {
      w.expert = -1;
    } else {
      const int32_t e = p.expert_ids[blockIdx.y];
      w.expert = e >= 0 && e < p.experts ? e : -1;
    }
  }
  return w;
}

// The parameters of expert e: its weight, scales, zero points, global scale and bias.
template <class C>
__device__ __forceinline__ void move_to_expert(DenseParams& p, int64_t e) {
  if (p.bias != nullptr) p.bias = static_cast<const typename C::Out*>(p.bias) + e * p.n;
  p.w = static_cast<const char*>(p.w) + e * p.expert_w_bytes;
  if (p.scales != nullptr) p.scales = static_cast<const char*>(p.scales) + e * p.expert_s_bytes;
  if (p.zeros != nullptr) p.zeros = static_cast<const char*>(p.zeros) + e * p.expert_z_bytes;
  if (p.global != nullptr) p.global += e;
}

// The rows of A and C tile row `row` (m0 + r) reads and writes: -1 for rows past M (dense) or
// padding slots (MoE). An id is compared unsigned, so a negative one is padding too.
template <class C>
__device__ __forceinline__ int64_t a_row(const DenseParams& p, int64_t row) {
  if constexpr (C::kMoe) {
    const uint32 id = static_cast<uint32>(p.sorted_ids[row]);
    return id < static_cast<uint64_t>(p.m * p.top_k) ? static_cast<int64_t>(id / p.top_k) : -1;
  } else {
    return row < p.m ? row : -1;
  }
}
template <class C>
__device__ __forceinline__ int64_t c_row(const DenseParams& p, int64_t row) {
  if constexpr (C::kMoe) {
    const uint32 id = static_cast<uint32>(p.sorted_ids[row]);
    return id < static_cast<uint64_t>(p.m * p.top_k) ? static_cast<int64_t>(id) : -1;
  } else {
    return row < p.m ? row : -1;
  }
}
// Tile rows that may hold a row of C (the epilogue's loops stop there; c_row says which do).
template <class C>
__device__ __forceinline__ int tile_rows(const DenseParams& p, int64_t m0) {
  if constexpr (C::kMoe) {
    return C::kBlockM;
  } else {
    return p.m - m0 < C::kBlockM ? static_cast<int>(p.m - m0) : C::kBlockM;
  }
}

}  // namespace hm::gemm
