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
  const float* act_scales;  // 8-bit activations: f32 [m] per-token scales of A (else null)
  void* c;              // [m][n] output, row-major, output dtype
  float* partials;      // split-K: [splits][m][n_pad] f32 (workspace)
  int32_t* counters;    // split-K: one per output tile, zero on entry, left zero (workspace)
  int64_t m, n, k;      // the real problem
  int64_t n_pad, k_pad;  // the packed weight's padded shape
  int64_t scale_cols;    // columns of the packed scale tensor (n_pad, or n_pad / group_n for blocks)
  // K steps each split handles: a step is one 128-byte row of activations, 64 k of 16-bit
  // activations (one weight chunk), 128 k of 8-bit ones (two chunks; dense_step_chunks).
  int32_t k_chunks_per_split;
  int32_t splits;              // gridDim.z
  // MoE, indexed (gemm/sched.cuh; null sorted_ids: a dense GEMM). Token block y's rows are the
  // flat assignment ids sorted_ids[y * block_m + r] (A row id / top_k, C row id; an id >= m * top_k
  // is padding), all routed to expert expert_ids[y] (outside [0, experts): no work, e.g. an
  // expert on another rank); blocks from *num_padded / block_m on have none. C has m * top_k rows.
  const int32_t* sorted_ids;
  const int32_t* expert_ids;
  const int32_t* num_padded;
  int64_t top_k, experts;
  // Bytes between experts in w, scales and zeros (bias: n elements; global: one f32).
  int64_t expert_w_bytes, expert_s_bytes, expert_z_bytes;
  // TMA descriptors (CUtensorMap: 128 opaque bytes, 64-byte aligned) of the activations and the
  // weight for wgmma tiles that copy with TMA (else zero), copied in per call from the kernel's
  // cache of encoded maps (runtime/tensor_map.hpp: re-encoded when an input changes). The
  // kernel takes its parameter as __grid_constant__, so their addresses are valid for TMA.
  struct alignas(64) TensorMap {
    uint64_t opaque[16];
  };
  TensorMap tma_a, tma_w;
  // ... and of the scale and zero-point codes when the tile copies those with TMA too
  // (dense_group_slots_consecutive), else zero.
  TensorMap tma_s, tma_z;
  // MoE, grouped (appended after the maps so that no earlier field moves; gemm/sched.cuh):
  // moe_mode kMoeIndexed reads the routing above. kMoeContiguous: A and C are [m] rows, expert e
  // owns rows [expert_offsets[e], expert_offsets[e + 1]) (each clamped to [0, m) on its own).
  // kMoeMasked: A and C are [experts][m] slabs, expert e's first masked_m[e] rows (clamped to
  // [0, m]) are real. row_end is not an argument: move_to_expert sets it, in the kernel's copy,
  // to one past the expert's last real row.
  const int32_t* expert_offsets;
  const int32_t* masked_m;
  int64_t row_end;
  int32_t moe_mode;
  // Activation scales per token and K group (Config::kActGroupK > 0): act_scales is
  // [m][act_groups] (DeepSeek's 1 x 128); else [m] and this is 1.
  int64_t act_groups;
};

// DenseParams::moe_mode (the values of humming.h's HM_MOE_MODE_*).
constexpr int32_t kMoeIndexed = 0;
constexpr int32_t kMoeContiguous = 1;
constexpr int32_t kMoeMasked = 2;

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define HM_PARAMS_HD __host__ __device__
#else
#define HM_PARAMS_HD
#endif

// Weight chunks each warp keeps in flight per strip: a warp waits for its loads once per group
// of this many chunks, so small M (latency bound, one strip per warp) wants several; the wide
// tiles of larger M keep one (their registers go to accumulators, and more tokens per chunk
// hide the latency), as does anything whose two buffers of chunks x bits words would be large.
HM_PARAMS_HD constexpr int dense_chunks_in_flight(int warp_strips, int weight_bits) {
  return warp_strips > 1 ? 1 : 16 / weight_bits >= 4 ? 4 : 16 / weight_bits >= 2 ? 2 : 1;
}

// K steps the mma.sync kernel loads per group (double buffered): the chunks above, two per
// step with 8-bit activations (dense_step_chunks below), so the weights in flight take the
// same registers either way; at least one step.
HM_PARAMS_HD constexpr int dense_mma_steps_in_flight(int warp_strips, int weight_bits,
                                                     int act_bits) {
  return dense_chunks_in_flight(warp_strips, weight_bits) * act_bits / 16 > 1
             ? dense_chunks_in_flight(warp_strips, weight_bits) * act_bits / 16
             : 1;
}

// Dynamic shared memory of a dense mma.sync block: the double-buffered activation tiles
// [2][steps][block_m][128 bytes] (dense_mma_steps_in_flight), reused by the epilogue's f32
// tile [block_m][block_n + 4].
HM_PARAMS_HD constexpr int dense_smem_bytes(int block_m, int block_n, int steps) {
  return 2 * steps * block_m * 128 > block_m * (block_n + 4) * 4 ? 2 * steps * block_m * 128
                                                                   : block_m * (block_n + 4) * 4;
}

// The K groups one K step of a kernel needs scale / zero-point codes for ("slots"); a step is a
// 64-wide chunk (mma.sync, and wgmma with 16-bit activations) or 128 k (wgmma with 8-bit
// activations), made of 4 MMA atoms (16 or 32 k). Group sizes are multiples of the atom (rules
// R17, R18), so an atom never straddles groups: a group of whole steps has one slot per step, a
// divisor of the step (16, 32, 64) step / group_k slots, anything else (48, 80, 96 ...) one slot
// per atom. group_k 0: no group scales, one slot.
HM_PARAMS_HD constexpr int dense_group_slots(int group_k, int step_k = 64) {
  return (group_k <= 0 || group_k % step_k == 0) ? 1
                                                 : (step_k % group_k == 0 ? step_k / group_k : 4);
}

// Whether a step's group slots are consecutive group rows (a group of whole steps, or a divisor
// of the step): the codes of a step are then one 2-D box of the scale / zero-point tensor, which
// the wgmma kernel's TMA tiles copy with TMA. Other group sizes (48, 96 ...) repeat rows across
// the step's atoms and are copied per slot with cp.async.
HM_PARAMS_HD constexpr bool dense_group_slots_consecutive(int group_k, int step_k = 64) {
  return group_k <= 0 || group_k % step_k == 0 || step_k % group_k == 0;
}

// The most K splits that run as one thread-block cluster (the portable cluster size): the host
// sizes cluster split-K with it, the epilogue keeps one set of registers per split.
constexpr int kDenseMaxClusterSplits = 8;

// Both dense kernels (gemm/dense_mma.cuh, gemm/dense_wgmma.cuh) step K by one 128-byte row of
// activations: 64 k of 16-bit activations, one 64-wide weight chunk per warp strip; 128 k of
// 8-bit activations, two chunks. Either way a step is 4 MMA atoms (k16 or k32) of 16 A registers.
HM_PARAMS_HD constexpr int dense_step_k(int act_bits) { return 1024 / act_bits; }
HM_PARAMS_HD constexpr int dense_step_chunks(int act_bits) { return 16 / act_bits; }

// Token widths (the wgmma instruction's N: a tile's block_m) the sm90a kernel can issue: every
// multiple of 8 up to 256 for float inputs; the PTX ISA gives integer wgmma (int8 activations)
// only N = 8, 16, 24, 32 and then multiples of 16 (m64n40k32.s32.s8.s8 is an illegal shape).
// scripts/gen_wgmma.py writes the int8 instruction for these widths only.
HM_PARAMS_HD constexpr bool dense_wgmma_token_width_ok(int block_m, bool int8_activations) {
  return block_m >= 8 && block_m <= 256 && block_m % 8 == 0 &&
         (!int8_activations || block_m <= 32 || block_m % 16 == 0);
}

// The threads that copy a wgmma tile's activation rows with cp.async, and how many rows (16-byte
// units over 8 per row) each copies per stage. A MoE tile with TMA gathers its routed rows in the
// copying warp's 32 lanes (a tensor box cannot gather), every other tile in all of its `threads`
// computing threads. A MoE gatherer holds one pointer per row, so it takes at most
// kMoeMaxGatheredRows: the kernel asserts it and the MoE family refuses tiles past it.
constexpr int kMoeMaxGatheredRows = 8;
HM_PARAMS_HD constexpr int wgmma_act_copiers(bool moe_tma, int threads) {
  return moe_tma ? 32 : threads;
}
HM_PARAMS_HD constexpr int wgmma_act_rows_per_copier(int block_m, int copiers) {
  return (block_m * 8 + copiers - 1) / copiers;
}

// Whether the wgmma kernel stages a format's group / block scale codes per channel in each
// pipeline stage: yes for group scales; block scales with 8-bit activations (one code per block
// of channels) are read from global memory as each K step is issued instead. (16-bit
// activations with block scales run on the mma.sync kernel.)
HM_PARAMS_HD constexpr bool dense_wgmma_stages_scale_codes(int act_bits, bool group_scales,
                                                           bool block_scales) {
  return group_scales && !(block_scales && act_bits == 8);
}

// The element size of the weight's TMA map: a box row (one K step of a strip, 128 bytes per
// lane word) holds at most 256 elements, so 32-bit words up to 1 KiB and 64-bit ones beyond (the
// 8-bit activations' two chunks of 5..8-bit weights).
HM_PARAMS_HD constexpr int dense_wgmma_weight_tma_bytes(int lane_words) {
  return lane_words * 128 > 256 * 4 ? 8 : 4;
}

// Shared memory of the wgmma kernel. Each pipeline stage holds, for one K step: the activation
// tile [block_m][128 bytes] (128B-swizzled, so stage starts are 1024-byte aligned), each warp's
// weight chunks of the step (128 bytes per 32-bit word a lane holds: `lane_words` = weight bits
// x chunks per step), and the scale and zero-point codes of the block's channels per group slot
// [slot][channel], each part starting on a multiple of 128 bytes (TMA destinations). The
// epilogue's f32 tile reuses the stages; 1024 bytes of slack let the kernel align the base.
HM_PARAMS_HD constexpr int dense_round_up(int x, int to) { return (x + to - 1) / to * to; }
HM_PARAMS_HD constexpr int dense_wgmma_weight_offset(int block_m) { return block_m * 128; }
HM_PARAMS_HD constexpr int dense_wgmma_scale_offset(int block_m, int warps, int lane_words) {
  return dense_wgmma_weight_offset(block_m) + warps * 128 * lane_words;
}
HM_PARAMS_HD constexpr int dense_wgmma_zero_offset(int block_m, int warps, int lane_words,
                                                   int group_slots, int scale_code_bytes) {
  return dense_round_up(dense_wgmma_scale_offset(block_m, warps, lane_words) +
                            group_slots * 16 * warps * scale_code_bytes,
                        128);
}
HM_PARAMS_HD constexpr int dense_wgmma_stage_bytes(int block_m, int warps, int lane_words,
                                                   int group_slots, int scale_code_bytes,
                                                   int zero_code_bytes) {
  return dense_round_up(dense_wgmma_zero_offset(block_m, warps, lane_words, group_slots,
                                                scale_code_bytes) +
                            group_slots * 16 * warps * zero_code_bytes,
                        1024);
}
HM_PARAMS_HD constexpr int dense_wgmma_smem_bytes(int block_m, int warps, int stages,
                                                  int lane_words, int group_slots,
                                                  int scale_code_bytes, int zero_code_bytes) {
  return 1024 + (stages * dense_wgmma_stage_bytes(block_m, warps, lane_words, group_slots,
                                                  scale_code_bytes, zero_code_bytes) >
                         block_m * (16 * warps + 4) * 4
                     ? stages * dense_wgmma_stage_bytes(block_m, warps, lane_words, group_slots,
                                                        scale_code_bytes, zero_code_bytes)
                     : block_m * (16 * warps + 4) * 4);
}

}  // namespace hm::gemm
