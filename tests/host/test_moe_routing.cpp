// The host reference of the MoE routing helpers (src/quant/moe_routing.cpp): the alignment checked
// against its contract (docs/moe.md) by an independent checker over random routings, empty
// experts, one expert taking every token, expert maps with -1, out-of-range ids, T = 1 .. 8192,
// top_k 1/2/4/8 and every block size; the size rules; the reduction and its rounding.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "humming.h"
#include "quant/moe_routing.hpp"
#include "quant/scalar_codec.hpp"

namespace {

using hm::quant::MoeAlignInput;
using hm::quant::MoeAlignOutput;

// Checks `out` against the contract for `in`, independently of how moe_align computes it.
void expect_contract(const MoeAlignInput& in, const std::vector<int32_t>& ids,
                     const std::vector<int32_t>& map, const MoeAlignOutput& out) {
  const int32_t E = in.local_experts ? in.local_experts : in.num_experts;
  const int64_t n = in.tokens * in.top_k;
  const int32_t B = in.block_size;
  ASSERT_EQ(out.expert_offsets.size(), size_t(E) + 1);
  ASSERT_EQ(out.sorted_ids.size() % B, 0u);
  ASSERT_EQ(out.expert_ids.size(), out.sorted_ids.size() / B);
  ASSERT_GE(int64_t(out.sorted_ids.size()), n + int64_t(E) * (B - 1));
  // Kept ids per expert, by the definition.
  std::vector<std::vector<int32_t>> want(E);
  for (int64_t f = 0; f < n; ++f) {
    const int32_t g = ids[f];
    if (g < 0 || g >= in.num_experts) continue;
    const int32_t e = map.empty() ? g : map[g];
    if (e < 0 || e >= E) continue;
    want[e].push_back(int32_t(f));
  }
  int64_t at = 0;
  for (int32_t e = 0; e < E; ++e) {
    ASSERT_EQ(out.expert_offsets[e], at) << "expert " << e;
    ASSERT_EQ(out.expert_counts[e], int32_t(want[e].size())) << "expert " << e;
    const int64_t padded = (int64_t(want[e].size()) + B - 1) / B * B;
    for (int64_t s = 0; s < padded; ++s) {
      const int32_t expect = s < int64_t(want[e].size()) ? want[e][s] : int32_t(n);
      ASSERT_EQ(out.sorted_ids[at + s], expect) << "expert " << e << " slot " << s;
    }
    for (int64_t b = at / B; b < (at + padded) / B; ++b) ASSERT_EQ(out.expert_ids[b], e);
    at += padded;
  }
  ASSERT_EQ(out.expert_offsets[E], at);
  ASSERT_EQ(out.num_tokens_padded, at);
  for (size_t s = size_t(at); s < out.sorted_ids.size(); ++s) ASSERT_EQ(out.sorted_ids[s], n);
  for (size_t b = size_t(at / B); b < out.expert_ids.size(); ++b) ASSERT_EQ(out.expert_ids[b], -1);
}

MoeAlignOutput run(const std::vector<int32_t>& ids, int64_t tokens, int32_t top_k, int32_t experts,
                   int32_t local, int32_t block, const std::vector<int32_t>& map) {
  MoeAlignInput in;
  in.topk_ids = ids.data();
  in.tokens = tokens;
  in.top_k = top_k;
  in.num_experts = experts;
  in.local_experts = local;
  in.block_size = block;
  in.expert_map = map.empty() ? nullptr : map.data();
  MoeAlignOutput out = hm::quant::moe_align(in);
  expect_contract(in, ids, map, out);
  return out;
}

TEST(MoeRouting, SmallExampleByHand) {
  // 3 tokens, top-2, 4 experts, block 8: expert 1 gets flat ids 0, 3, 4; expert 2 gets 1;
  // expert 3 gets 2 and 5; expert 0 none.
  const std::vector<int32_t> ids = {1, 2, 3, 1, 1, 3};
  const MoeAlignOutput out = run(ids, 3, 2, 4, 0, 8, {});
  EXPECT_EQ(out.num_tokens_padded, 24);
  EXPECT_EQ(out.expert_offsets, (std::vector<int32_t>{0, 0, 8, 16, 24}));
  EXPECT_EQ(out.expert_counts, (std::vector<int32_t>{0, 3, 1, 2}));
  const std::vector<int32_t> head = {0, 3, 4, 6, 6, 6, 6, 6, 1, 6, 6, 6, 6, 6, 6, 6, 2, 5};
  EXPECT_EQ(std::vector<int32_t>(out.sorted_ids.begin(), out.sorted_ids.begin() + 18), head);
  EXPECT_EQ(out.expert_ids[0], 1);
  EXPECT_EQ(out.expert_ids[1], 2);
  EXPECT_EQ(out.expert_ids[2], 3);
  EXPECT_EQ(out.expert_ids[3], -1);
}

TEST(MoeRouting, RandomRoutingsAcrossShapes) {
  std::mt19937 rng(7);
  for (int64_t tokens : {1, 2, 7, 64, 129, 1000, 4096, 8192}) {
    for (int32_t top_k : {1, 2, 4, 8}) {
      for (int32_t experts : {8, 128, 256}) {
        const int32_t block = 8 << (rng() % 6);  // 8 .. 256
        std::vector<int32_t> ids(size_t(tokens * top_k));
        for (auto& id : ids) id = int32_t(rng() % experts);
        SCOPED_TRACE(std::to_string(tokens) + " tokens, top-" + std::to_string(top_k) + ", " +
                     std::to_string(experts) + " experts, block " + std::to_string(block));
        run(ids, tokens, top_k, experts, 0, block, {});
      }
    }
  }
}

TEST(MoeRouting, EveryBlockSizeEmptyExpertsAndOneExpertTakingAll) {
  for (int32_t block = 8; block <= 256; block *= 2) {
    std::vector<int32_t> ids(300 * 4, 5);  // every assignment on expert 5 of 16
    MoeAlignOutput out = run(ids, 300, 4, 16, 0, block, {});
    EXPECT_EQ(out.expert_counts[5], 1200);
    EXPECT_EQ(out.num_tokens_padded, (1200 + block - 1) / block * block);
    for (int32_t e = 0; e < 16; ++e) {
      if (e != 5) {
        EXPECT_EQ(out.expert_counts[e], 0);
      }
    }
  }
}

TEST(MoeRouting, ExpertMapDropsOtherRanksAndOutOfRangeIds) {
  std::mt19937 rng(11);
  // 64 global experts, this rank holds 16 of them (every 4th, shuffled local ids); the rest -1.
  std::vector<int32_t> map(64, -1);
  std::vector<int32_t> locals(16);
  for (int i = 0; i < 16; ++i) locals[i] = i;
  std::shuffle(locals.begin(), locals.end(), rng);
  for (int i = 0; i < 16; ++i) map[4 * i + 1] = locals[i];
  map[0] = 99;  // beyond num_local_experts: dropped too
  for (int64_t tokens : {1, 33, 513, 4096}) {
    std::vector<int32_t> ids(size_t(tokens * 8));
    for (auto& id : ids) id = int32_t(rng() % 80) - 8;  // -8 .. 71: some out of range
    run(ids, tokens, 8, 64, 16, 16, map);
  }
  // Every assignment dropped: nothing padded, every slot the sentinel.
  std::vector<int32_t> ids(40, -1);
  const MoeAlignOutput out = run(ids, 10, 4, 64, 16, 32, map);
  EXPECT_EQ(out.num_tokens_padded, 0);
}

TEST(MoeRouting, SizeRules) {
  using hm::quant::moe_align_sizes;
  const auto s = moe_align_sizes(4096, 8, 256, 0, 64, false);
  EXPECT_EQ(s.sorted_ids, (4096 * 8 + 256 * 63 + 63) / 64 * 64);
  EXPECT_EQ(s.expert_ids, s.sorted_ids / 64);
  EXPECT_EQ(s.expert_offsets, 257);
  EXPECT_EQ(s.expert_counts, 256);
  EXPECT_EQ(moe_align_sizes(0, 1, 1, 0, 8, false).sorted_ids, 8);  // room for one padded expert
  auto refused = [](auto&& call, const char* needle) {
    try {
      call();
      ADD_FAILURE() << "accepted; expected a refusal naming " << needle;
    } catch (const hm::Error& e) {
      EXPECT_EQ(e.status(), HM_ERROR_INVALID_ARGUMENT);
      EXPECT_NE(e.message().find(needle), std::string::npos) << e.message();
    }
  };
  refused([] { moe_align_sizes(-1, 8, 256, 0, 64, false); }, "num_tokens");
  refused([] { moe_align_sizes(1, 0, 256, 0, 64, false); }, "top_k");
  refused([] { moe_align_sizes(1, 65, 256, 0, 64, false); }, "top_k");
  refused([] { moe_align_sizes(1, 8, 0, 0, 64, false); }, "num_experts");
  refused([] { moe_align_sizes(1, 8, HM_MAX_EXPERTS + 1, 0, 64, false); }, "num_experts");
  refused([] { moe_align_sizes(1, 8, 2048, 0, 64, false); }, "num_local_experts");
  refused([] { moe_align_sizes(1, 8, 256, 128, 64, false); }, "expert_map");
  refused([] { moe_align_sizes(1, 8, 256, 0, 48, false); }, "block_size");
  refused([] { moe_align_sizes(1, 8, 256, 0, 4, false); }, "block_size");
  refused([] { moe_align_sizes(1, 8, 256, 0, 512, false); }, "block_size");
  refused([] { moe_align_sizes(HM_MAX_M, 8, 256, 0, 64, false); }, "int32");
}

TEST(MoeRouting, RoundingMatchesTheDevice) {
  using hm::quant::bf16_from_float_rn;
  using hm::quant::f16_from_float_rn;
  // Every f16 value converts back to itself; halfway cases round to even.
  for (uint32_t code = 0; code < 0x10000; ++code) {
    if ((code & 0x7c00) == 0x7c00) continue;  // Inf / NaN
    const float x = hm::quant::float_from_half(uint16_t(code));
    ASSERT_EQ(f16_from_float_rn(x), uint16_t(code)) << code;
  }
  EXPECT_EQ(f16_from_float_rn(1.0f + 1.0f / 2048), 0x3c00);      // tie -> even (1.0)
  EXPECT_EQ(f16_from_float_rn(1.0f + 3.0f / 2048), 0x3c02);      // tie -> even (up)
  EXPECT_EQ(f16_from_float_rn(65519.0f), 0x7bff);
  EXPECT_EQ(f16_from_float_rn(65520.0f), 0x7c00);
  EXPECT_EQ(f16_from_float_rn(-1e-8f), 0x8000);
  EXPECT_EQ(f16_from_float_rn(std::ldexp(3.0f, -26)), 0x0001);  // 0.75 ulp of the smallest: up
  EXPECT_EQ(bf16_from_float_rn(1.0f + 1.0f / 256), 0x3f80);     // tie -> even
  EXPECT_EQ(bf16_from_float_rn(1.0f + 3.0f / 256), 0x3f82);
}

TEST(MoeRouting, ReduceSumsKeptRowsInOrder) {
  // 2 tokens, top-3, n = 4; token 0's slot 1 is on a dropped expert, whose row holds NaN to prove
  // it is not read.
  const int32_t ids[] = {0, 7, 1, 2, 2, -1};
  const float weights[] = {0.5f, 100.0f, 0.25f, 1.0f, 2.0f, 3.0f};
  std::vector<uint16_t> in(6 * 4);
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 4; ++c) in[r * 4 + c] = hm::quant::bf16_from_float_rn(float(r + c));
  for (int c = 0; c < 4; ++c) in[1 * 4 + c] = 0x7fc0;  // NaN (expert 7 is out of range)
  uint16_t out[8];
  hm::quant::moe_reduce(in.data(), weights, ids, nullptr, 2, 3, 4, 4, 4, true, out);
  for (int c = 0; c < 4; ++c) {
    EXPECT_EQ(hm::quant::float_from_bf16(out[c]), 0.5f * c + 0.25f * (2 + c)) << c;
    EXPECT_EQ(hm::quant::float_from_bf16(out[4 + c]), 1.0f * (3 + c) + 2.0f * (4 + c)) << c;
  }
}

}  // namespace
