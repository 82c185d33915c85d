// The grouped MoE modes (HM_ARG_MOE_MODE, docs/moe.md) and the mma.sync MoE family on the mock
// driver: the argument checks of their routing slots, the grid of each layout and the kernel
// parameter it receives (the GPU tests in tests/gpu/test_moe_gemm.cpp check results).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "api/support/mock_driver_test.hpp"
#include "api/support/plan_calls.hpp"
#include "humming.h"
#include "mock_driver/mock_loader.hpp"
#include <humming/gemm/params.h>

namespace {

using hm::test::GemmArguments;
using hm::test::gemm_launch;
using hm::test::last_error;

class MoeGroupedApi : public hm::test::MockPlanTest {};

// hm_plan_describe of a MoE plan names the indexed launch and how grouped calls pick a tile.
TEST_F(MoeGroupedApi, DescribeNamesEveryMode) {
  hm_plan_t* p = plan("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=512 e=8");
  ASSERT_NE(p, nullptr);
  char text[512];
  ASSERT_EQ(hm_plan_describe(p, 16, text, sizeof text, nullptr), HM_SUCCESS) << last_error();
  const std::string d = text;
  EXPECT_NE(d.find("indexed, grid"), std::string::npos) << d;
  EXPECT_NE(d.find("M / 8 tokens (contiguous) or T_max * E / 8 (masked)"), std::string::npos) << d;
  hm_plan_destroy(p);
}

// The grouped modes (HM_ARG_MOE_MODE): each requires its own routing slot and refuses the
// others', checks alignment and the device of the new slots, and launches the grid of its layout
// with the mode, the slot and M in the kernel's parameter.
TEST_F(MoeGroupedApi, ArgumentsAndGrid) {
  hm_plan_t* p = plan("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=512 e=8");
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(hm_plan_prepare(p), HM_SUCCESS) << last_error();
  auto kernel_params = [](const hm_mock_launch_t& launch) {
    hm::gemm::DenseParams params;
    EXPECT_GE(launch.arg_bytes_size, sizeof params);
    std::memcpy(&params, launch.arg_bytes, sizeof params);
    return params;
  };

  // Contiguous: M rows of A and C, expert offsets [E + 1].
  {
    GemmArguments args(ctx_);
    ASSERT_NO_FATAL_FAILURE(args.set_all(p, 100));
    hm_launch_params_set_int(args.params(), HM_ARG_MOE_MODE, HM_MOE_MODE_CONTIGUOUS);
    EXPECT_EQ(hm_plan_gemm(p, args.params(), nullptr), HM_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("HM_ARG_EXPERT_OFFSETS is not set (HM_MOE_MODE_CONTIGUOUS"),
              std::string::npos)
        << last_error();
    hm_launch_params_set_pointer(args.params(), HM_ARG_EXPERT_OFFSETS, args.buffer() + 2);
    EXPECT_EQ(hm_plan_gemm(p, args.params(), nullptr), HM_ERROR_MISALIGNED);
    EXPECT_NE(last_error().find("HM_ARG_EXPERT_OFFSETS"), std::string::npos) << last_error();
    const uint64_t offsets = args.buffer() + 4;  // 4-byte alignment is enough
    hm_launch_params_set_pointer(args.params(), HM_ARG_EXPERT_OFFSETS, offsets);
    // The indexed slots are not read in this mode, so setting one is a mistake worth naming.
    hm_launch_params_set_pointer(args.params(), HM_ARG_SORTED_IDS, args.buffer());
    EXPECT_EQ(hm_plan_gemm(p, args.params(), nullptr), HM_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("HM_ARG_SORTED_IDS is set but HM_ARG_MOE_MODE is "
                                "HM_MOE_MODE_CONTIGUOUS"),
              std::string::npos)
        << last_error();
    hm_launch_params_set_pointer(args.params(), HM_ARG_SORTED_IDS, 0);
    hm_launch_params_set_pointer(args.params(), HM_ARG_MASKED_M, args.buffer());
    EXPECT_EQ(hm_plan_gemm(p, args.params(), nullptr), HM_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("HM_ARG_MASKED_M is set"), std::string::npos) << last_error();
    hm_launch_params_set_pointer(args.params(), HM_ARG_MASKED_M, 0);
    // No TOP_K needed. The tile is the one of M / 8 tokens (the rows per expert of 100 rows are
    // those of 12 tokens at top-8: 16-row blocks here, where 100 tokens take 64); the grid:
    // ceil(M / block) blocks plus one partial block per expert, but never more blocks than rows.
    int32_t block = 0, indexed_block = 0;
    ASSERT_EQ(hm_plan_moe_block_size(p, 100 / 8, &block), HM_SUCCESS) << last_error();
    ASSERT_EQ(hm_plan_moe_block_size(p, 100, &indexed_block), HM_SUCCESS) << last_error();
    EXPECT_LT(block, indexed_block);
    auto launch = gemm_launch(p, args);
    ASSERT_TRUE(launch.has_value());
    EXPECT_EQ(std::string(launch->function).rfind("hm_moe_wgmma_", 0), 0u) << launch->function;
    EXPECT_NE(std::string(launch->function).find("_bm" + std::to_string(block) + "_"),
              std::string::npos)
        << launch->function;
    EXPECT_EQ(launch->grid[1], static_cast<uint32_t>(std::min<int64_t>((100 + block - 1) / block + 8, 100)));
    hm::gemm::DenseParams params = kernel_params(*launch);
    EXPECT_EQ(params.moe_mode, HM_MOE_MODE_CONTIGUOUS);
    EXPECT_EQ(reinterpret_cast<uint64_t>(params.expert_offsets), offsets);
    EXPECT_EQ(params.masked_m, nullptr);
    EXPECT_EQ(params.sorted_ids, nullptr);
    EXPECT_EQ(params.m, 100);
    EXPECT_EQ(params.experts, 8);
    // M = 3 rows: at most 3 blocks hold rows, whatever the offsets say.
    hm_launch_params_set_int(args.params(), HM_ARG_M, 3);
    launch = gemm_launch(p, args);
    ASSERT_TRUE(launch.has_value());
    EXPECT_EQ(launch->grid[1], 3u);
    // A mode outside the three is refused, naming them.
    hm_launch_params_set_int(args.params(), HM_ARG_MOE_MODE, 3);
    EXPECT_EQ(hm_plan_gemm(p, args.params(), nullptr), HM_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("HM_MOE_MODE_MASKED (2), got 3"), std::string::npos)
        << last_error();
  }

  // Masked: A and C are [E][T_max] slabs (M = T_max), valid rows per expert in MASKED_M.
  {
    GemmArguments args(ctx_);
    ASSERT_NO_FATAL_FAILURE(args.set_all(p, 40));
    hm_launch_params_set_int(args.params(), HM_ARG_MOE_MODE, HM_MOE_MODE_MASKED);
    EXPECT_EQ(hm_plan_gemm(p, args.params(), nullptr), HM_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("HM_ARG_MASKED_M is not set (HM_MOE_MODE_MASKED"),
              std::string::npos)
        << last_error();
    hm_launch_params_set_pointer(args.params(), HM_ARG_MASKED_M, args.buffer() + 1);
    EXPECT_EQ(hm_plan_gemm(p, args.params(), nullptr), HM_ERROR_MISALIGNED);
    EXPECT_NE(last_error().find("HM_ARG_MASKED_M"), std::string::npos) << last_error();
    const uint64_t masked = args.buffer() + 64;
    hm_launch_params_set_pointer(args.params(), HM_ARG_MASKED_M, masked);
    hm_launch_params_set_pointer(args.params(), HM_ARG_EXPERT_OFFSETS, args.buffer());
    EXPECT_EQ(hm_plan_gemm(p, args.params(), nullptr), HM_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("HM_ARG_EXPERT_OFFSETS is set"), std::string::npos)
        << last_error();
    hm_launch_params_set_pointer(args.params(), HM_ARG_EXPERT_OFFSETS, 0);
    // The tile of T_max * E / 8 tokens (up to T_max rows per expert); every slab's blocks: the
    // counts are device data.
    int32_t block = 0;
    ASSERT_EQ(hm_plan_moe_block_size(p, 40 * 8 / 8, &block), HM_SUCCESS) << last_error();
    const auto launch = gemm_launch(p, args);
    ASSERT_TRUE(launch.has_value());
    EXPECT_NE(std::string(launch->function).find("_bm" + std::to_string(block) + "_"),
              std::string::npos)
        << launch->function;
    EXPECT_EQ(launch->grid[1], static_cast<uint32_t>(8 * ((40 + block - 1) / block)));
    const hm::gemm::DenseParams params = kernel_params(*launch);
    EXPECT_EQ(params.moe_mode, HM_MOE_MODE_MASKED);
    EXPECT_EQ(reinterpret_cast<uint64_t>(params.masked_m), masked);
    EXPECT_EQ(params.expert_offsets, nullptr);
    EXPECT_EQ(params.m, 40);
    // A T_max whose slabs need more blocks than the grid's 65535 rows is refused with the fix
    // (buffers that size would take GBs of the mock's host memory: their check is turned off).
    hm_launch_params_set_int(args.params(), HM_ARG_M, 1 << 20);
    hm::test::ScopedEnv unsized("HM_MOCK_NO_POINTER_RANGE", "1");
    EXPECT_EQ(hm_plan_gemm(p, args.params(), nullptr), HM_ERROR_UNSUPPORTED);
    EXPECT_NE(last_error().find("smaller T_max"), std::string::npos) << last_error();
  }

  // The new slots are device pointers like the others: memory of another device is refused.
  {
    hm_context_t* other = hm::test::create_context(cache_.path(), 1);
    ASSERT_NE(other, nullptr);
    uint64_t foreign = 0;
    ASSERT_EQ(hm_device_alloc(other, 4096, &foreign), HM_SUCCESS) << last_error();
    GemmArguments args(ctx_);
    ASSERT_NO_FATAL_FAILURE(args.set_all(p, 16));
    hm_launch_params_set_int(args.params(), HM_ARG_MOE_MODE, HM_MOE_MODE_CONTIGUOUS);
    hm_launch_params_set_pointer(args.params(), HM_ARG_EXPERT_OFFSETS, foreign);
    EXPECT_EQ(hm_plan_gemm(p, args.params(), nullptr), HM_ERROR_WRONG_DEVICE);
    EXPECT_NE(last_error().find("HM_ARG_EXPERT_OFFSETS (0x"), std::string::npos) << last_error();
    hm_launch_params_set_pointer(args.params(), HM_ARG_EXPERT_OFFSETS, 0);
    hm_launch_params_set_int(args.params(), HM_ARG_MOE_MODE, HM_MOE_MODE_MASKED);
    hm_launch_params_set_pointer(args.params(), HM_ARG_MASKED_M, foreign);
    EXPECT_EQ(hm_plan_gemm(p, args.params(), nullptr), HM_ERROR_WRONG_DEVICE);
    EXPECT_NE(last_error().find("HM_ARG_MASKED_M (0x"), std::string::npos) << last_error();
    hm_device_free(other, foreign);
    hm_context_destroy(other);
  }
  hm_plan_destroy(p);

  // max_m counts tokens: a contiguous call may have 8 rows per token of it (the rows per expert
  // of max_m tokens at top-8), and one more block's worth is refused, naming the rule.
  {
    hm_format_t* f = nullptr;
    ASSERT_EQ(hm_format_parse("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=512 e=8", &f), HM_SUCCESS);
    hm_plan_options_t options;
    hm_plan_options_init(&options);
    options.max_m = 16;
    hm_plan_t* small = nullptr;
    ASSERT_EQ(hm_plan_create(ctx_, f, &options, &small), HM_SUCCESS) << last_error();
    hm_format_destroy(f);
    ASSERT_EQ(hm_plan_prepare(small), HM_SUCCESS) << last_error();
    GemmArguments args(ctx_);
    ASSERT_NO_FATAL_FAILURE(args.set_all(small, 128));
    hm_launch_params_set_int(args.params(), HM_ARG_MOE_MODE, HM_MOE_MODE_CONTIGUOUS);
    hm_launch_params_set_pointer(args.params(), HM_ARG_EXPERT_OFFSETS, args.buffer());
    EXPECT_TRUE(gemm_launch(small, args).has_value());
    hm_launch_params_set_int(args.params(), HM_ARG_M, 136);
    EXPECT_EQ(hm_plan_gemm(small, args.params(), nullptr), HM_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("grouped MoE call of 17 tokens"), std::string::npos)
        << last_error();
    hm_plan_destroy(small);
  }

  // A dense plan refuses a MoE mode and the grouped slots.
  hm_plan_t* dense = plan("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=512");
  ASSERT_NE(dense, nullptr);
  ASSERT_EQ(hm_plan_prepare(dense), HM_SUCCESS) << last_error();
  GemmArguments args(ctx_);
  ASSERT_NO_FATAL_FAILURE(args.set_all(dense, 4));
  hm_launch_params_set_int(args.params(), HM_ARG_MOE_MODE, HM_MOE_MODE_MASKED);
  EXPECT_EQ(hm_plan_gemm(dense, args.params(), nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("has no experts"), std::string::npos) << last_error();
  hm_launch_params_set_int(args.params(), HM_ARG_MOE_MODE, 0);
  hm_launch_params_set_pointer(args.params(), HM_ARG_EXPERT_OFFSETS, args.buffer());
  EXPECT_EQ(hm_plan_gemm(dense, args.params(), nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("HM_ARG_EXPERT_OFFSETS is set"), std::string::npos) << last_error();
  hm_plan_destroy(dense);
}

// The mma.sync MoE family (moe_mma, every arch from sm_75), forced here by a tuning JSON on the
// mock's sm_90a: one block per (channel block, row block), no K splits and no workspace (the
// whole K in one block), the indexed routing and the 8-bit activation scales in its parameter.
TEST_F(MoeGroupedApi, MmaSyncFamilyLaunchesWithoutKSplits) {
  hm_format_t* f = nullptr;
  ASSERT_EQ(hm_format_parse("w=uint4b8 a=e4m3 c=bf16 s=bf16:g128 n=256 k=640 e=8", &f),
            HM_SUCCESS);
  hm_plan_options_t o;
  hm_plan_options_init(&o);
  o.tuning_json = R"({"dense": [{"kernel": "moe_mma", "block_m": 16, "warps": 4,
                                  "warp_strips": 2}]})";
  hm_plan_t* p = nullptr;
  ASSERT_EQ(hm_plan_create(ctx_, f, &o, &p), HM_SUCCESS) << last_error();
  hm_format_destroy(f);
  ASSERT_EQ(hm_plan_prepare(p), HM_SUCCESS) << last_error();
  char text[512];
  ASSERT_EQ(hm_plan_describe(p, 40, text, sizeof text, nullptr), HM_SUCCESS) << last_error();
  EXPECT_EQ(std::string(text).rfind("moe_mma bm16_w4_s2 indexed", 0), 0u) << text;
  int32_t block = 0;
  int64_t rows = 0;
  ASSERT_EQ(hm_plan_moe_block_size(p, 40, &block), HM_SUCCESS) << last_error();
  ASSERT_EQ(hm_plan_moe_rows(p, 40, 2, &rows), HM_SUCCESS) << last_error();
  EXPECT_EQ(block, 16);
  uint64_t workspace = 1;
  ASSERT_EQ(hm_plan_workspace_size(p, 40, &workspace), HM_SUCCESS) << last_error();
  EXPECT_EQ(workspace, 0u);

  GemmArguments args(ctx_);
  ASSERT_NO_FATAL_FAILURE(args.set_all(p, 40));
  const uint64_t ids = args.buffer() + 4096, experts = args.buffer() + 65536,
                 padded = args.buffer() + 131072, scales = args.buffer() + 196608;
  hm_launch_params_set_pointer(args.params(), HM_ARG_SORTED_IDS, ids);
  hm_launch_params_set_pointer(args.params(), HM_ARG_EXPERT_IDS, experts);
  hm_launch_params_set_pointer(args.params(), HM_ARG_NUM_TOKENS_PADDED, padded);
  hm_launch_params_set_int(args.params(), HM_ARG_TOP_K, 2);
  EXPECT_EQ(hm_plan_gemm(p, args.params(), nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("HM_ARG_ACT_SCALES is not set"), std::string::npos) << last_error();
  hm_launch_params_set_pointer(args.params(), HM_ARG_ACT_SCALES, scales);
  const auto launch = gemm_launch(p, args);
  ASSERT_TRUE(launch.has_value());
  EXPECT_EQ(std::string(launch->function).rfind("hm_moe_mma_bm16_w4_s2_", 0), 0u)
      << launch->function;
  EXPECT_EQ(launch->grid[0], 256u / 128u);  // 128 channels per block (4 warps x 2 strips)
  EXPECT_EQ(launch->grid[1], static_cast<uint32_t>(std::min<int64_t>(rows / block, 80)));
  EXPECT_EQ(launch->grid[2], 1u);
  hm::gemm::DenseParams params;
  ASSERT_GE(launch->arg_bytes_size, sizeof params);
  std::memcpy(&params, launch->arg_bytes, sizeof params);
  EXPECT_EQ(params.splits, 1);
  EXPECT_EQ(params.k_chunks_per_split, 5);  // 640 k in 128-k steps (8-bit activations)
  EXPECT_EQ(params.top_k, 2);
  EXPECT_EQ(params.experts, 8);
  EXPECT_EQ(reinterpret_cast<uint64_t>(params.sorted_ids), ids);
  EXPECT_EQ(reinterpret_cast<uint64_t>(params.act_scales), scales);
  EXPECT_EQ(params.moe_mode, HM_MOE_MODE_INDEXED);
  hm_plan_destroy(p);
}

}  // namespace
