// MoE routing kernels (docs/moe.md): the vLLM-style alignment of top-k assignments into
// expert-sorted, block-padded flat ids (hm_moe_align), and the top-k weighted reduction of the
// down projection's rows (hm_moe_reduce). Both are deterministic: no result depends on the order
// in which threads or blocks run (atomics only count). Host reference: src/quant/moe_routing.cpp.
#pragma once

#include <humming/moe/routing.h>

#include <humming/core/types.cuh>

namespace hm::moe {

// Exclusive prefix sum of one value per thread over the block (blockDim.x == kAlignThreads).
// `scratch` holds kAlignWarps + 1 ints; *total gets the block's sum. Contains __syncthreads.
__device__ __forceinline__ int32_t block_exclusive_scan(int32_t value, int32_t* scratch,
                                                        int32_t* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int32_t inclusive = value;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int32_t other = __shfl_up_sync(0xffffffffu, inclusive, d);
    if (lane >= d) inclusive += other;
  }
  if (lane == 31) scratch[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    int32_t w = lane < kAlignWarps ? scratch[lane] : 0;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int32_t other = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w += other;
    }
    scratch[lane] = w;  // inclusive warp totals
    if (lane == 31) scratch[32] = w;
  }
  __syncthreads();
  *total = scratch[32];
  return (warp > 0 ? scratch[warp - 1] : 0) + inclusive - value;
}

// The local expert whose padded range [offset[e], offset[e + 1]) holds `slot` < offset[E]: the
// last e with offset[e] <= slot (empty experts share their offset with the next one).
__device__ __forceinline__ int32_t expert_of_slot(const int32_t* offset, int32_t experts,
                                                  int32_t slot) {
  int32_t lo = 0, hi = experts - 1;
  while (lo < hi) {
    const int32_t mid = (lo + hi + 1) / 2;
    if (offset[mid] <= slot)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// One launch of ceil(assignments / kAlignChunk) blocks (at least 1) of kAlignThreads threads,
// align_shared_bytes(E) bytes of dynamic shared memory. Every block counts all assignments
// (redundantly: the ids are at most a few hundred KiB and come from L2), so each knows every
// expert's offset and how many of its ids come before its own chunk, with no workspace and no
// second launch; then it scatters its chunk stably and fills its share of the padding.
// Global traffic: blocks x 4 x assignments bytes read (ids, plus map lookups), 4 x capacity
// (sorted_ids) + 4 x capacity / block_size (expert_ids) bytes written.
__device__ __forceinline__ void align(const AlignParams& p) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int32_t E = p.local_experts, Ep = (E + 3) / 4 * 4;
  int32_t* total = reinterpret_cast<int32_t*>(smem);  // [Ep] kept assignments per expert
  int32_t* cursor = total + Ep;                       // [Ep] before this chunk, then next slot
  int32_t* offset = cursor + Ep;                      // [Ep + 4] padded exclusive prefix
  int32_t* scratch = offset + Ep + 4;                 // [36]
  unsigned char* hist = reinterpret_cast<unsigned char*>(scratch + 36);  // [kAlignWarps][Ep]
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int64_t n = p.assignments;
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kAlignChunk;
  const int64_t end = begin + kAlignChunk < n ? begin + kAlignChunk : n;

  for (int e = tid; e < Ep; e += kAlignThreads) total[e] = cursor[e] = 0;
  for (int i = tid; i < kAlignWarps * Ep / 4; i += kAlignThreads)
    reinterpret_cast<uint32_t*>(hist)[i] = 0;
  __syncthreads();

  // 1. Counts: every kept assignment, and those before this block's chunk. kCountBatch ids per
  // thread are loaded (and mapped) before any atomic, so their global loads are in flight
  // together rather than one L2 round trip per id.
  constexpr int kCountBatch = 8;
  for (int64_t base = tid; base < n; base += int64_t{kAlignThreads} * kCountBatch) {
    int32_t e[kCountBatch];
#pragma unroll
    for (int k = 0; k < kCountBatch; ++k) {
      const int64_t i = base + int64_t{k} * kAlignThreads;
      e[k] = i < n ? p.topk_ids[i] : -1;
    }
#pragma unroll
    for (int k = 0; k < kCountBatch; ++k) e[k] = local_expert(e[k], p.expert_map, p.num_experts, E);
#pragma unroll
    for (int k = 0; k < kCountBatch; ++k) {
      if (e[k] < 0) continue;
      atomicAdd(&total[e[k]], 1);
      if (base + int64_t{k} * kAlignThreads < begin) atomicAdd(&cursor[e[k]], 1);
    }
  }
  __syncthreads();

  // 2. offset = exclusive prefix sum of the counts padded to block_size; each thread owns a run
  // of consecutive experts.
  const int per = (E + kAlignThreads - 1) / kAlignThreads;
  const int first = tid * per, last = first + per < E ? first + per : E;
  int32_t sum = 0;
  for (int e = first; e < last; ++e)
    sum += (total[e] + p.block_size - 1) / p.block_size * p.block_size;
  int32_t padded_total = 0;
  int32_t run = block_exclusive_scan(sum, scratch, &padded_total);
  for (int e = first; e < last; ++e) {
    offset[e] = run;
    run += (total[e] + p.block_size - 1) / p.block_size * p.block_size;
  }
  if (tid == 0) offset[E] = padded_total;
  __syncthreads();

  if (blockIdx.x == 0) {
    for (int e = tid; e <= E; e += kAlignThreads) p.expert_offsets[e] = offset[e];
    if (p.expert_counts != nullptr)
      for (int e = tid; e < E; e += kAlignThreads) p.expert_counts[e] = total[e];
    if (tid == 0) *p.num_tokens_padded = padded_total;
  }

  // 3. Padding and unused slots get the sentinel; blocks get their expert (-1 past the end).
  // Slots holding an assignment are left to step 4 (disjoint writes, any block order).
  const int32_t sentinel = static_cast<int32_t>(n);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kAlignThreads;
  for (int64_t s = static_cast<int64_t>(blockIdx.x) * kAlignThreads + tid; s < p.capacity;
       s += stride) {
    const int32_t slot = static_cast<int32_t>(s);
    if (slot >= padded_total) {
      p.sorted_ids[s] = sentinel;
    } else {
      const int32_t e = expert_of_slot(offset, E, slot);
      if (slot - offset[e] >= total[e]) p.sorted_ids[s] = sentinel;
    }
  }
  const int64_t blocks = p.capacity / p.block_size;
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * kAlignThreads + tid; b < blocks;
       b += stride) {
    const int32_t slot = static_cast<int32_t>(b * p.block_size);
    p.expert_ids[b] = slot < padded_total ? expert_of_slot(offset, E, slot) : -1;
  }

  // 4. Stable scatter of this chunk, a tile of kAlignThreads ids at a time. Within a tile, an id's
  // rank among the same expert's ids = its rank in its warp (__match_any_sync) + the counts of
  // that expert in the earlier warps (hist); cursor[e] is the next free slot of expert e.
  for (int e = tid; e < E; e += kAlignThreads) cursor[e] += offset[e];
  __syncthreads();
  for (int64_t tile = begin; tile < end; tile += kAlignThreads) {
    const int64_t i = tile + tid;
    const int32_t e = i < end ? local_expert(p.topk_ids[i], p.expert_map, p.num_experts, E) : -1;
    const uint32_t same = __match_any_sync(0xffffffffu, e);
    const int rank = __popc(same & ((1u << lane) - 1u));
    if (e >= 0 && rank == 0) hist[warp * Ep + e] = static_cast<unsigned char>(__popc(same));
    __syncthreads();
    if (e >= 0) {
      int32_t slot = cursor[e] + rank;
      for (int w = 0; w < warp; ++w) slot += hist[w * Ep + e];
      p.sorted_ids[slot] = static_cast<int32_t>(i);
    }
    __syncthreads();
    for (int x = tid; x < E; x += kAlignThreads) {  // advance the cursors, clear the tile's counts
      int32_t count = 0;
      for (int w = 0; w < kAlignWarps; ++w) {
        count += hist[w * Ep + x];
        hist[w * Ep + x] = 0;
      }
      cursor[x] += count;
    }
    __syncthreads();
  }
}

// a * b + c with one rounding (PTX fma.rn.f32), as std::fma on the host reference.
__device__ __forceinline__ float fma_rn(float a, float b, float c) {
  float d;
  asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(d) : "f"(a), "f"(b), "f"(c));
  return d;
}

// 16 bytes of 16-bit values: one vector load or store.
struct alignas(16) Vec8x16 {
  uint16 h[8];
};

// out[t][c] = sum over j in 0..top_k-1 of weights[t][j] * in[t * top_k + j][c], for kept
// assignments only (a dropped one's row is not read), accumulated in f32 by fma.rn in increasing j
// from 0.0f, then rounded once to T. kVec = 8: 16-byte accesses (n % 8 == 0, 16-byte aligned
// in/out); kVec = 1 otherwise. Any grid of kReduceThreads-thread blocks (it strides).
// Global traffic: 2 x n x (kept assignments + tokens) bytes plus 8 x tokens x top_k (ids and
// weights, read from L1 after the first thread of a token).
template <typename T, int kVec>
__device__ __forceinline__ void reduce(const ReduceParams& p) {
  static_assert(sizeof(T) == 2 && (kVec == 8 || kVec == 1), "16-bit values, 8 or 1 per thread");
  const int64_t per_row = p.n / kVec;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < p.vectors;
       v += stride) {
    const int64_t t = v / per_row, c = (v % per_row) * kVec;
    float acc[kVec];
#pragma unroll
    for (int x = 0; x < kVec; ++x) acc[x] = 0.0f;
    for (int j = 0; j < p.top_k; ++j) {
      const int64_t flat = t * p.top_k + j;
      if (local_expert(p.topk_ids[flat], p.expert_map, p.num_experts, p.local_experts) < 0)
        continue;
      const float w = p.weights[flat];
      const uint16* row = static_cast<const uint16*>(p.in) + flat * p.n + c;
      uint16 h[kVec];
      if constexpr (kVec == 8) {
        const Vec8x16 loaded = *reinterpret_cast<const Vec8x16*>(row);
#pragma unroll
        for (int x = 0; x < 8; ++x) h[x] = loaded.h[x];
      } else {
        h[0] = row[0];
      }
#pragma unroll
      for (int x = 0; x < kVec; ++x) acc[x] = fma_rn(w, to_float(T{h[x]}), acc[x]);
    }
    uint16* dst = static_cast<uint16*>(p.out) + t * p.n + c;
    if constexpr (kVec == 8) {
      Vec8x16 stored;
#pragma unroll
      for (int x = 0; x < 8; ++x) stored.h[x] = from_float<T>(acc[x]).bits;
      *reinterpret_cast<Vec8x16*>(dst) = stored;
    } else {
      dst[0] = from_float<T>(acc[0]).bits;
    }
  }
}

}  // namespace hm::moe

// Defines the extern "C" alignment kernel `name` (launch: see hm::moe::align).
#define HM_DEFINE_MOE_ALIGN(name)                                        \
  extern "C" __global__ void __launch_bounds__(::hm::moe::kAlignThreads) \
      name(const ::hm::moe::AlignParams p) {                             \
    ::hm::moe::align(p);                                                 \
  }

// Defines the extern "C" reduction `name` for 16-bit type T (::hm::f16 or ::hm::bf16) and kVec
// values per thread.
#define HM_DEFINE_MOE_REDUCE(name, T, kVec)                               \
  extern "C" __global__ void __launch_bounds__(::hm::moe::kReduceThreads) \
      name(const ::hm::moe::ReduceParams p) {                             \
    ::hm::moe::reduce<T, kVec>(p);                                        \
  }
