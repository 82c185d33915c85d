// Host reference of the MoE routing kernels (kernels/humming/moe/routing.cuh, docs/moe.md): the
// alignment of top-k assignments into expert-sorted, block-padded flat ids, and the top-k
// weighted reduction. The GPU tests compare the kernels with these bit for bit.
#pragma once

#include <cstdint>
#include <vector>

namespace hm::quant {

struct MoeAlignInput {
  const int32_t* topk_ids = nullptr;  // [tokens][top_k] global expert ids
  int64_t tokens = 0;
  int32_t top_k = 0;
  int32_t num_experts = 0;
  int32_t local_experts = 0;            // 0: num_experts (must be num_experts without a map)
  int32_t block_size = 0;               // a power of two in [8, 256]
  const int32_t* expert_map = nullptr;  // [num_experts] global -> local (-1: not here), or null
};

struct MoeAlignOutput {
  std::vector<int32_t> sorted_ids;  // [capacity]
  std::vector<int32_t> expert_ids;  // [capacity / block_size]
  int32_t num_tokens_padded = 0;
  std::vector<int32_t> expert_offsets;  // [local_experts + 1]
  std::vector<int32_t> expert_counts;   // [local_experts]
};

// The capacities hm_moe_align_sizes reports, after checking the arguments
// (HM_ERROR_INVALID_ARGUMENT naming the bad one; the checks of hm_moe_align too, except pointers).
struct MoeAlignSizes {
  int64_t sorted_ids = 0;      // elements of sorted_ids
  int64_t expert_ids = 0;      // elements of expert_ids
  int64_t expert_offsets = 0;  // local_experts + 1
  int64_t expert_counts = 0;   // local_experts
};
MoeAlignSizes moe_align_sizes(int64_t tokens, int32_t top_k, int32_t num_experts,
                              int32_t local_experts, int32_t block_size, bool has_map);

// The alignment, exactly as hm_moe_align writes it (docs/moe.md).
MoeAlignOutput moe_align(const MoeAlignInput& in);

// out[t][c] = sum_j weights[t][j] * in[t * top_k + j][c] over kept assignments, in f32 by
// std::fma in increasing j from 0.0f, rounded once to f16 / bf16 (`bf16`). in, out: 16-bit codes.
void moe_reduce(const uint16_t* in, const float* weights, const int32_t* topk_ids,
                const int32_t* expert_map, int64_t tokens, int32_t top_k, int32_t num_experts,
                int32_t local_experts, int64_t n, bool bf16, uint16_t* out);

// Round-to-nearest-even f32 -> f16 / bf16 codes, as the device's conversions (NaN: a quiet NaN).
uint16_t f16_from_float_rn(float x);
uint16_t bf16_from_float_rn(float x);
float float_from_bf16(uint16_t code);

}  // namespace hm::quant
