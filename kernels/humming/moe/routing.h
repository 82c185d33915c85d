// MoE routing (docs/moe.md): the kernels' runtime arguments and the one definition of which
// assignments are kept, as plain host/device code. The device kernels (routing.cuh), the host
// reference (src/quant/moe_routing.cpp), the launcher (src/api/moe.cpp) and the mock driver's host
// emulation all include this file.
#pragma once

#if defined(__CUDACC_RTC__)
#include <humming/core/types.cuh>
#else
#include <stdint.h>
#endif

#ifndef HM_HOST_DEVICE
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define HM_HOST_DEVICE __host__ __device__
#else
#define HM_HOST_DEVICE
#endif
#endif

namespace hm::moe {

inline constexpr int kMaxTopK = 64;             // assignments per token (HM_MAX_TOP_K)
inline constexpr int kMaxLocalExperts = 1024;   // experts on this rank (HM_MOE_MAX_LOCAL_EXPERTS)
inline constexpr int kMinBlockSize = 8;         // the GEMM's token block: a power of two in
inline constexpr int kMaxBlockSize = 256;       // [kMinBlockSize, kMaxBlockSize]

// Alignment: blocks of kAlignThreads threads (32 warps); block b scatters the flat ids
// [b * kAlignChunk, (b + 1) * kAlignChunk), in tiles of kAlignThreads ids.
inline constexpr int kAlignThreads = 1024;
inline constexpr int kAlignWarps = kAlignThreads / 32;
inline constexpr int kAlignChunk = 4096;
// Reduction: blocks of kReduceThreads threads, grid-striding over (token, vector) pairs.
inline constexpr int kReduceThreads = 256;
inline constexpr int64_t kMaxGridBlocks = 65535;

// The local expert of assignment `id` (a global expert id from topk_ids), or -1 when it is
// dropped: ids outside [0, num_experts), and with an expert map, ids it maps to -1 or to anything
// outside [0, local_experts). Without a map, local_experts == num_experts.
HM_HOST_DEVICE inline int32_t local_expert(int32_t id, const int32_t* expert_map,
                                           int32_t num_experts, int32_t local_experts) {
  if (id < 0 || id >= num_experts) return -1;
  const int32_t e = expert_map != nullptr ? expert_map[id] : id;
  return e >= 0 && e < local_experts ? e : -1;
}

// Capacity of sorted_ids for `assignments` = tokens * top_k flat ids: each local expert pads its
// count up to a multiple of block_size, so at most local_experts * (block_size - 1) padding
// slots are added; rounded up to whole blocks. The caller checks it fits int32.
HM_HOST_DEVICE constexpr int64_t align_capacity(int64_t assignments, int32_t local_experts,
                                             int32_t block_size) {
  const int64_t most = assignments + int64_t{local_experts} * (block_size - 1);
  return (most + block_size - 1) / block_size * block_size;
}

// Dynamic shared memory of the alignment kernel for `local_experts` experts: the total and
// before-this-block counts, the offsets, a scan scratch, and per-warp byte counts of one tile.
HM_HOST_DEVICE constexpr int64_t align_shared_bytes(int32_t local_experts) {
  const int64_t padded = (int64_t{local_experts} + 3) / 4 * 4;
  return 4 * (2 * padded + padded + 4 + 32 + 4) + kAlignWarps * padded;
}

// hm_moe_align's kernel parameters (one struct by value; fixed-size fields).
struct AlignParams {
  const int32_t* topk_ids;      // [assignments] global expert ids
  const int32_t* expert_map;    // [num_experts] global -> local, or null
  int32_t* sorted_ids;          // [capacity]
  int32_t* expert_ids;          // [capacity / block_size]
  int32_t* num_tokens_padded;   // [1]
  int32_t* expert_offsets;      // [local_experts + 1]
  int32_t* expert_counts;       // [local_experts], or null
  int64_t assignments;          // tokens * top_k; also the sentinel
  int64_t capacity;             // a multiple of block_size, < 2^31
  int32_t num_experts;
  int32_t local_experts;
  int32_t block_size;
  int32_t reserved;             // 0
};

// hm_moe_reduce's kernel parameters.
struct ReduceParams {
  const void* in;               // [tokens * top_k][n] f16 / bf16, rows in flat-id order
  const float* weights;         // [tokens][top_k] f32
  const int32_t* topk_ids;      // [tokens][top_k]
  const int32_t* expert_map;    // [num_experts], or null
  void* out;                    // [tokens][n], same dtype as in
  int64_t tokens;
  int64_t n;                    // columns
  int64_t vectors;              // tokens * (n / vector width): the work items
  int32_t top_k;
  int32_t num_experts;
  int32_t local_experts;
  int32_t reserved;             // 0
};

}  // namespace hm::moe
