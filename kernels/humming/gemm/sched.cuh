// Schedulers: which output tile, K range and expert a block works on, and which rows of A and C
// the tile's rows are. The GEMM templates ask only these, so a dense GEMM (rows are tokens) and
// the MoE GEMM (indexed: rows are routed assignments, gathered from A and scattered into C;
// grouped: runs of rows of one expert) share one mainloop and one epilogue. Grid: x = channel
// blocks, y = token blocks, z = K splits (one thread-block cluster with cluster split-K).
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

// The rows [lo, hi) expert e owns in the grouped-contiguous mode: each offset clamped to [0, m)
// on its own (never trusted as a bound), an end before the start taken as an empty run. Every
// block and move_to_expert derive an expert's run from its two offsets alone, so they agree.
__device__ __forceinline__ void contiguous_rows(const DenseParams& p, int64_t e, int64_t& lo,
                                                int64_t& hi) {
  const int64_t a = p.expert_offsets[e], b = p.expert_offsets[e + 1];
  lo = a < 0 ? 0 : a > p.m ? p.m : a;
  hi = b < lo ? lo : b > p.m ? p.m : b;
}

// Grouped contiguous: experts in order, ceil(rows / kBlockM) blocks each, so block y belongs to
// the first expert whose running block count passes y. Each warp finds it on its own, 32
// experts at a time: one load of 32 offset pairs, a warp prefix sum of their block counts and a
// ballot (E = 128: four rounds; a one-expert-per-iteration walk serialized 128 L2 loads, 20 us
// at M = 1, NOTES v23). No prefix-sum launch, no workspace, the counts stay on the device.
// Blocks past the last run leave. Every lane of the warp must call it (block_work runs at the
// kernel's entry, converged).
template <int kBlockM>
__device__ __forceinline__ void contiguous_block(const DenseParams& p, BlockWork& w) {
  constexpr unsigned kAll = 0xffffffffu;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t y = blockIdx.y;
  int64_t before = 0;  // blocks of the experts before this round's first
  for (int64_t base = 0; base < p.experts; base += 32) {
    const int64_t e = base + lane;
    int64_t lo = 0, hi = 0;
    if (e < p.experts) contiguous_rows(p, e, lo, hi);
    const int64_t own = (hi - lo + kBlockM - 1) / kBlockM;
    int64_t upto = own;  // blocks of this round's experts up to this lane's, inclusive
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int64_t v = __shfl_up_sync(kAll, upto, d);
      if (lane >= d) upto += v;
    }
    const unsigned hit = __ballot_sync(kAll, y < before + upto);
    if (hit != 0) {
      const int src = __ffs(hit) - 1;
      const int64_t first = lo + (y - before - (upto - own)) * kBlockM;
      w.expert = base + src;
      w.m0 = __shfl_sync(kAll, first, src);
      return;
    }
    before += __shfl_sync(kAll, upto, 31);
  }
  w.expert = -1;
}

// Grouped masked: ceil(m / kBlockM) blocks per expert slab (m = T_max), whatever the counts (the
// grid cannot depend on device data); blocks past the expert's count leave.
template <int kBlockM>
__device__ __forceinline__ void masked_block(const DenseParams& p, BlockWork& w) {
  const int64_t per_expert = (p.m + kBlockM - 1) / kBlockM;
  const int64_t e = blockIdx.y / per_expert, first = blockIdx.y % per_expert * kBlockM;
  w.m0 = e * p.m + first;
  w.expert = e < p.experts && first < static_cast<int64_t>(p.masked_m[e]) ? e : -1;
}

// kStrips: 16-channel strips per block; kBlockM: rows per block. C::kMoe selects the MoE
// schedules (DenseParams::moe_mode says which one).
template <class C, int kStrips>
__device__ __forceinline__ BlockWork block_work(const DenseParams& p) {
  BlockWork w;
  w.strip0 = static_cast<int64_t>(blockIdx.x) * kStrips;
  w.m0 = static_cast<int64_t>(blockIdx.y) * C::kBlockM;
  // K steps of the kernel: 64-wide chunks, or 128 k for the wgmma kernel's 8-bit activations
  // (params.h; a last step may hold one real chunk).
  constexpr int kStepK = dense_step_k(C::kActBits);
  const int64_t k_chunks = (p.k_pad + kStepK - 1) / kStepK;
  w.kc_begin = static_cast<int64_t>(blockIdx.z) * p.k_chunks_per_split;
  w.kc_end = w.kc_begin + p.k_chunks_per_split < k_chunks ? w.kc_begin + p.k_chunks_per_split
                                                          : k_chunks;
  w.expert = 0;
  if constexpr (C::kMoe) {
    // Every block of a cluster (same x and y) reaches the same answer, so a cluster leaves
    // together or not at all. The counts are device data: read, never trusted as bounds.
    if (p.moe_mode == kMoeContiguous) {
      contiguous_block<C::kBlockM>(p, w);
    } else if (p.moe_mode == kMoeMasked) {
      masked_block<C::kBlockM>(p, w);
    } else if (w.m0 >= static_cast<int64_t>(*p.num_padded)) {
      w.expert = -1;
    } else {
      const int32_t e = p.expert_ids[blockIdx.y];
      w.expert = e >= 0 && e < p.experts ? e : -1;
    }
  }
  return w;
}

// The parameters of expert e: its weight, scales, zero points, global scale and bias, and in the
// grouped modes the end of its rows (a_row / c_row stop there).
template <class C>
__device__ __forceinline__ void move_to_expert(DenseParams& p, int64_t e) {
  if (p.moe_mode == kMoeContiguous) {
    int64_t lo;
    contiguous_rows(p, e, lo, p.row_end);
  } else if (p.moe_mode == kMoeMasked) {
    const int64_t count = p.masked_m[e];
    p.row_end = e * p.m + (count < 0 ? 0 : count > p.m ? p.m : count);
  }
  if (p.bias != nullptr) p.bias = static_cast<const typename C::Out*>(p.bias) + e * p.n;
  p.w = static_cast<const char*>(p.w) + e * p.expert_w_bytes;
  if (p.scales != nullptr) p.scales = static_cast<const char*>(p.scales) + e * p.expert_s_bytes;
  if (p.zeros != nullptr) p.zeros = static_cast<const char*>(p.zeros) + e * p.expert_z_bytes;
  if (p.global != nullptr) p.global += e;
}

// The rows of A and C tile row `row` (m0 + r) reads and writes: -1 for rows past M (dense),
// padding slots (indexed MoE) or rows past the expert's run (grouped MoE: a tile starts inside
// its expert's run, so only the end needs a check). An id is compared unsigned, so a negative
// one is padding too.
template <class C>
__device__ __forceinline__ int64_t a_row(const DenseParams& p, int64_t row) {
  if constexpr (C::kMoe) {
    if (p.moe_mode != kMoeIndexed) return row < p.row_end ? row : -1;
    const uint32 id = static_cast<uint32>(p.sorted_ids[row]);
    return id < static_cast<uint64_t>(p.m * p.top_k) ? static_cast<int64_t>(id / p.top_k) : -1;
  } else {
    return row < p.m ? row : -1;
  }
}
template <class C>
__device__ __forceinline__ int64_t c_row(const DenseParams& p, int64_t row) {
  if constexpr (C::kMoe) {
    if (p.moe_mode != kMoeIndexed) return row < p.row_end ? row : -1;
    const uint32 id = static_cast<uint32>(p.sorted_ids[row]);
    return id < static_cast<uint64_t>(p.m * p.top_k) ? static_cast<int64_t>(id) : -1;
  } else {
    return row < p.m ? row : -1;
  }
}
// The rows of A behind a thread's accumulator columns, for per-column data such as activation
// scales: column 2 * (lane % 4) + h of token group j is tile row j * 8 + that (the MMA D
// fragment). kCached resolves them once per tile (for MoE, whose a_row reads HM_ARG_SORTED_IDS);
// otherwise each lookup asks a_row (for dense tiles, a compare). Padding and rows past M read
// row 0, for outputs that are never stored.
template <class C, int kTokenGroups, bool kCached>
struct ColumnRows {
  int32_t cached[kCached ? kTokenGroups : 1][2];
  __device__ __forceinline__ ColumnRows(const DenseParams& p, int64_t m0, int lane) {
    if constexpr (kCached) {
#pragma unroll
      for (int j = 0; j < kTokenGroups; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t r = a_row<C>(p, m0 + 2 * (lane & 3) + j * 8 + h);
          cached[j][h] = r < 0 ? 0 : static_cast<int32_t>(r);
        }
    }
  }
  // The row of A of column h of token group j, the thread's first column being tile row col0.
  __device__ __forceinline__ int64_t operator()(const DenseParams& p, int64_t col0, int j,
                                                int h) const {
    if constexpr (kCached) {
      return cached[j][h];
    } else {
      const int64_t r = a_row<C>(p, col0 + j * 8 + h);
      return r < 0 ? 0 : r;
    }
  }
};

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
