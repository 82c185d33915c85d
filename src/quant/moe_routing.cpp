#include "quant/moe_routing.hpp"

#include <humming/moe/routing.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/error.hpp"
#include "humming.h"
#include "quant/scalar_codec.hpp"

namespace hm::quant {

MoeAlignSizes moe_align_sizes(int64_t tokens, int32_t top_k, int32_t num_experts,
                              int32_t local_experts, int32_t block_size, bool has_map) {
  auto bad = [](const std::string& text) { fail(HM_ERROR_INVALID_ARGUMENT, text); };
  if (tokens < 0 || tokens > HM_MAX_M)
    bad("num_tokens is " + std::to_string(tokens) + ": it must be in [0, HM_MAX_M]");
  if (top_k < 1 || top_k > moe::kMaxTopK)
    bad("top_k is " + std::to_string(top_k) + ": it must be in [1, " +
        std::to_string(moe::kMaxTopK) + "] (HM_MAX_TOP_K)");
  if (num_experts < 1 || num_experts > HM_MAX_EXPERTS)
    bad("num_experts is " + std::to_string(num_experts) +
        ": it must be in [1, HM_MAX_EXPERTS = " + std::to_string(HM_MAX_EXPERTS) + "]");
  const int32_t local = local_experts == 0 ? num_experts : local_experts;
  if (local < 1 || local > moe::kMaxLocalExperts)
    bad("num_local_experts is " + std::to_string(local) + ": it must be in [1, " +
        std::to_string(moe::kMaxLocalExperts) + "] (HM_MOE_MAX_LOCAL_EXPERTS; 0 = num_experts)");
  if (!has_map && local != num_experts)
    bad("num_local_experts (" + std::to_string(local) + ") differs from num_experts (" +
        std::to_string(num_experts) +
        ") but there is no expert_map to say which experts are local");
  if (block_size < moe::kMinBlockSize || block_size > moe::kMaxBlockSize ||
      (block_size & (block_size - 1)) != 0)
    bad("block_size is " + std::to_string(block_size) + ": it must be a power of two in [" +
        std::to_string(moe::kMinBlockSize) + ", " + std::to_string(moe::kMaxBlockSize) + "]");
  // tokens <= 2^31 - 1 and top_k <= 64: the products below stay far inside int64.
  const int64_t assignments = tokens * top_k;
  const int64_t capacity = moe::align_capacity(assignments, local, block_size);
  if (capacity > std::numeric_limits<int32_t>::max())
    bad("num_tokens x top_k (" + std::to_string(tokens) + " x " + std::to_string(top_k) +
        ") plus the padding of " + std::to_string(local) + " experts (" + std::to_string(capacity) +
        " slots) does not fit the int32 ids of sorted_ids");
  MoeAlignSizes s;
  s.sorted_ids = capacity;
  s.expert_ids = capacity / block_size;
  s.expert_offsets = int64_t{local} + 1;
  s.expert_counts = local;
  return s;
}

MoeAlignOutput moe_align(const MoeAlignInput& in) {
  const MoeAlignSizes sizes = moe_align_sizes(in.tokens, in.top_k, in.num_experts, in.local_experts,
                                              in.block_size, in.expert_map != nullptr);
  const int32_t E = static_cast<int32_t>(sizes.expert_counts);
  const int64_t n = in.tokens * in.top_k;
  const int32_t sentinel = static_cast<int32_t>(n);
  std::vector<std::vector<int32_t>> ids(E);  // each expert's flat ids, in increasing order
  for (int64_t i = 0; i < n; ++i) {
    const int32_t e = moe::local_expert(in.topk_ids[i], in.expert_map, in.num_experts, E);
    if (e >= 0) ids[e].push_back(static_cast<int32_t>(i));
  }
  MoeAlignOutput out;
  out.sorted_ids.assign(static_cast<size_t>(sizes.sorted_ids), sentinel);
  out.expert_ids.assign(static_cast<size_t>(sizes.expert_ids), -1);
  out.expert_offsets.assign(static_cast<size_t>(E) + 1, 0);
  out.expert_counts.assign(static_cast<size_t>(E), 0);
  int64_t at = 0;
  for (int32_t e = 0; e < E; ++e) {
    out.expert_offsets[e] = static_cast<int32_t>(at);
    out.expert_counts[e] = static_cast<int32_t>(ids[e].size());
    std::copy(ids[e].begin(), ids[e].end(), out.sorted_ids.begin() + at);
    const int64_t padded =
        (static_cast<int64_t>(ids[e].size()) + in.block_size - 1) / in.block_size * in.block_size;
    for (int64_t b = at / in.block_size; b < (at + padded) / in.block_size; ++b)
      out.expert_ids[b] = e;
    at += padded;
  }
  out.expert_offsets[E] = static_cast<int32_t>(at);
  out.num_tokens_padded = static_cast<int32_t>(at);
  return out;
}

uint16_t f16_from_float_rn(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7fff;           // NaN: the device's canonical NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 (or Inf): rounds to Inf
  if (a < 0x38800000u) {  // below 2^-14: a subnormal f16 (or zero); unit 2^-24
    const float m = std::fabs(x) * 16777216.0f;  // exact scaling by 2^24
    const float r = std::nearbyint(m);           // current mode: round to nearest even
    return sign | static_cast<uint16_t>(r);
  }
  // Normal: keep 10 mantissa bits, round to nearest even on the 13 dropped ones.
  const uint32_t rounded = a + 0x0fffu + ((a >> 13) & 1u);
  const uint32_t exp = (rounded >> 23) - 127 + 15;
  return sign | static_cast<uint16_t>((exp << 10) | ((rounded >> 13) & 0x3ffu));
}

uint16_t bf16_from_float_rn(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float float_from_bf16(uint16_t code) {
  const uint32_t u = static_cast<uint32_t>(code) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

void moe_reduce(const uint16_t* in, const float* weights, const int32_t* topk_ids,
                const int32_t* expert_map, int64_t tokens, int32_t top_k, int32_t num_experts,
                int32_t local_experts, int64_t n, bool bf16, uint16_t* out) {
  std::vector<float> acc(static_cast<size_t>(n));
  for (int64_t t = 0; t < tokens; ++t) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int32_t j = 0; j < top_k; ++j) {
      const int64_t flat = t * top_k + j;
      if (moe::local_expert(topk_ids[flat], expert_map, num_experts, local_experts) < 0) continue;
      const float w = weights[flat];
      const uint16_t* row = in + flat * n;
      for (int64_t c = 0; c < n; ++c)
        acc[c] = std::fma(w, bf16 ? float_from_bf16(row[c]) : float_from_half(row[c]), acc[c]);
    }
    for (int64_t c = 0; c < n; ++c)
      out[t * n + c] = bf16 ? bf16_from_float_rn(acc[c]) : f16_from_float_rn(acc[c]);
  }
}

}  // namespace hm::quant
