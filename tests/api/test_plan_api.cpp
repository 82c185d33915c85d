// The plan half of the C ABI on the mock driver: creation rules, prepare, workspace sizing and
// every argument check of hm_plan_gemm (the mock records the launch; GPU tests check results).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
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
using hm::test::ScopedEnv;

class PlanApi : public hm::test::MockDriverTest {
 protected:
  void SetUp() override {
    ctx_ = hm::test::create_context(cache_.path());
    ASSERT_NE(ctx_, nullptr);
  }
  void TearDown() override { hm_context_destroy(ctx_); }
  // A plan for the format `text`, with default options or with `tuning_json` as the tuning;
  // hm_plan_create must return `expect`.
  hm_plan_t* plan(const char* text, hm_status_t expect = HM_SUCCESS) {
    return create_plan(text, nullptr, expect);
  }
  hm_plan_t* tuned_plan(const char* text, const char* tuning_json,
                        hm_status_t expect = HM_SUCCESS) {
    hm_plan_options_t o;
    hm_plan_options_init(&o);
    o.tuning_json = tuning_json;
    return create_plan(text, &o, expect);
  }
  // The plan that `tuning_json` makes for the format `text` names `tile` when it describes M = m.
  void expect_tile(const char* text, const char* tuning_json, int64_t m, const char* tile) {
    hm_plan_t* p = tuned_plan(text, tuning_json);
    ASSERT_NE(p, nullptr);
    char desc[256] = "";
    EXPECT_EQ(hm_plan_describe(p, m, desc, sizeof desc, nullptr), HM_SUCCESS) << last_error();
    EXPECT_NE(std::string(desc).find(tile), std::string::npos) << tuning_json << ": " << desc;
    hm_plan_destroy(p);
  }
  // hm_plan_create refuses `tuning_json` for the format `text` with `status`, in a message that
  // names `named`.
  void expect_refused(const char* text, const char* tuning_json, hm_status_t status,
                      const char* named = "") {
    EXPECT_EQ(tuned_plan(text, tuning_json, status), nullptr);
    EXPECT_NE(last_error().find(named), std::string::npos) << tuning_json << ": " << last_error();
  }
  const hm::test::TemporaryDirectory cache_{"humming-plan-test"};
  hm_context_t* ctx_ = nullptr;

 private:
  hm_plan_t* create_plan(const char* text, const hm_plan_options_t* options, hm_status_t expect) {
    hm_format_t* f = nullptr;
    EXPECT_EQ(hm_format_parse(text, &f), HM_SUCCESS) << last_error();
    hm_plan_t* p = nullptr;
    EXPECT_EQ(hm_plan_create(ctx_, f, options, &p), expect) << text << ": " << last_error();
    hm_format_destroy(f);
    return p;
  }
};

// hm_plan_describe says which path an 8-bit activation call takes.
TEST_F(PlanApi, DescribeNamesTheEightBitActivationPath) {
  expect_tile("w=uint4b8 a=e4m3 c=bf16 s=bf16:g128 n=256 k=256", nullptr, 300,
              "e4m3 activations with per-token scales, group scales folded in f32 every 128 k");
  expect_tile("w=e4m3 a=e4m3 c=bf16 s=f32:b128x128 n=256 k=256", nullptr, 1,
              "block scales folded in f32 every 128 k");
  expect_tile("w=e2m1 a=e5m2 c=bf16 s=bf16:channel n=256 k=256", nullptr, 16,
              "K steps of 128), workspace 0 bytes; e5m2 activations with per-token scales");
  expect_tile("w=uint4b8 a=int8 c=bf16 s=bf16:channel n=256 k=256", nullptr, 16,
              "K steps of 128), workspace 0 bytes; int8 activations with per-token scales");
  expect_tile("w=uint8b128 a=int8 c=f16 s=f32:g256 n=256 k=512", nullptr, 300,
              "int8 activations with per-token scales, group scales folded in f32 every 256 k");
}

// Activation scales per token and K group (a=e4m3:g128): the plan describes the fold, hands the
// kernel the number of groups per row, and refuses what the kernel cannot fold.
TEST_F(PlanApi, ActivationGroupPlansFoldPerGroupAndSayWhatTheyCannotRun) {
  expect_tile("w=e4m3 a=e4m3:g128 c=bf16 s=f32:b128x128 n=256 k=1008", nullptr, 1,
              "e4m3 activations with per-token x 128-k group scales folded in f32 every 128 k, "
              "block scales folded in f32 every 128 k");
  hm_plan_t* p = plan("w=uint4b8 a=int8:g256 c=bf16 s=bf16:channel n=256 k=1008");
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(hm_plan_prepare(p), HM_SUCCESS) << last_error();
  GemmArguments args(ctx_);
  ASSERT_NO_FATAL_FAILURE(args.set_all(p, 40));
  hm_launch_params_set_pointer(args.params(), HM_ARG_ACT_SCALES, args.buffer() + 4096);
  const auto launch = gemm_launch(p, args);
  ASSERT_TRUE(launch.has_value());
  hm::gemm::DenseParams params;
  ASSERT_GE(launch->arg_bytes_size, sizeof params);
  std::memcpy(&params, launch->arg_bytes, sizeof params);
  EXPECT_EQ(params.act_groups, 4);  // ceil(1008 / 256)
  hm_plan_destroy(p);
  // Per token: one scale per row.
  p = plan("w=uint4b8 a=int8 c=bf16 s=bf16:channel n=256 k=1024");
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(hm_plan_prepare(p), HM_SUCCESS) << last_error();
  {
    GemmArguments per_token(ctx_);
    ASSERT_NO_FATAL_FAILURE(per_token.set_all(p, 40));
    hm_launch_params_set_pointer(per_token.params(), HM_ARG_ACT_SCALES, per_token.buffer() + 4096);
    const auto one = gemm_launch(p, per_token);
    ASSERT_TRUE(one.has_value());
    std::memcpy(&params, one->arg_bytes, sizeof params);
    EXPECT_EQ(params.act_groups, 1);
  }
  hm_plan_destroy(p);
  // Valid formats (rule R22) the kernel cannot fold: groups of 32 or 64 k, acc=f16, and weight
  // groups that neither divide nor are divided by the activation's.
  EXPECT_EQ(plan("w=e4m3 a=e4m3:g64 c=bf16 s=f32:channel n=256 k=256", HM_ERROR_UNSUPPORTED),
            nullptr);
  EXPECT_NE(last_error().find("multiple of 128"), std::string::npos) << last_error();
  EXPECT_EQ(plan("w=e4m3 a=e4m3:g128 c=f16 s=f32:channel acc=f16 n=256 k=256",
                 HM_ERROR_UNSUPPORTED),
            nullptr);
  EXPECT_NE(last_error().find("acc=f32"), std::string::npos) << last_error();
  EXPECT_EQ(plan("w=uint4b8 a=e4m3:g384 c=bf16 s=bf16:g256 n=256 k=768", HM_ERROR_UNSUPPORTED),
            nullptr);
  EXPECT_NE(last_error().find("one group size must divide the other"), std::string::npos)
      << last_error();
}

// int8 activations (s8 x s8 wgmma into s32): a plan is made and prepared for integer weights,
// its call needs the per-token scales and hands them to the kernel, and what has no kernel yet
// is refused at creation, naming what is missing.
TEST_F(PlanApi, Int8ActivationPlansLaunchWithTheirActivationScales) {
  hm_plan_t* p = plan("w=uint4b8 a=int8 c=bf16 s=bf16:channel n=256 k=1024");
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(hm_plan_prepare(p), HM_SUCCESS) << last_error();
  GemmArguments args(ctx_);
  ASSERT_NO_FATAL_FAILURE(args.set_all(p, 40));
  EXPECT_EQ(hm_plan_gemm(p, args.params(), nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("HM_ARG_ACT_SCALES is not set"), std::string::npos) << last_error();
  const uint64_t act_scales = args.buffer() + 4096;
  hm_launch_params_set_pointer(args.params(), HM_ARG_ACT_SCALES, act_scales);
  const auto launch = gemm_launch(p, args);
  ASSERT_TRUE(launch.has_value());
  EXPECT_EQ(std::string(launch->function).rfind("hm_dense_wgmma_", 0), 0u) << launch->function;
  // The kernel's parameter is gemm::DenseParams: the scales' pointer and the problem.
  ASSERT_GE(launch->arg_bytes_size, sizeof(hm::gemm::DenseParams));
  hm::gemm::DenseParams params;
  std::memcpy(&params, launch->arg_bytes, sizeof params);
  EXPECT_EQ(reinterpret_cast<uint64_t>(params.act_scales), act_scales);
  EXPECT_EQ(reinterpret_cast<uint64_t>(params.a), args.buffer());
  EXPECT_EQ(params.m, 40);
  EXPECT_EQ(params.n, 256);
  EXPECT_EQ(params.k, 1024);
  EXPECT_EQ(params.global, nullptr);
  hm_plan_destroy(p);

  // Float weights on int8 (rule R11) plan: as counts of their least step, with channel scales
  // and MXFP4's ue8m0 group x tensor scales (shifted into the counts), and the plan says so.
  for (const char* text : {"w=e2m1 a=int8 c=bf16 s=bf16:channel n=256 k=256",
                           "w=e2m1 a=int8 c=bf16 s=ue8m0:g32+tensor n=256 k=256",
                           "w=e2m3 a=int8 c=f16 s=f16:channel n=256 k=256"}) {
    hm_plan_t* fp = plan(text);
    ASSERT_NE(fp, nullptr) << text << ": " << last_error();
    char described[1024];
    ASSERT_EQ(hm_plan_describe(fp, 1, described, sizeof described, nullptr), HM_SUCCESS)
        << last_error();
    EXPECT_NE(std::string(described).find("weights as int8 counts of their least step"),
              std::string::npos)
        << described;
    if (std::string(text).find("ue8m0") != std::string::npos) {
      EXPECT_NE(std::string(described).find("(2^0 .. 2^3) written into the weights' step counts"),
                std::string::npos)
          << described;
    }
    hm_plan_destroy(fp);
  }
  // MXFP4's groups without the tensor scale fold in f32 every step (a partial set per group).
  hm_plan_t* plain = plan("w=e2m1 a=int8 c=bf16 s=ue8m0:g32 n=256 k=256");
  EXPECT_NE(plain, nullptr);
  hm_plan_destroy(plain);
  EXPECT_EQ(plan("w=uint4b8 a=int8 c=bf16 s=bf16:g96 n=256 k=256", HM_ERROR_UNSUPPORTED), nullptr);
  EXPECT_NE(last_error().find("int8 activations need group_k 32, 64 or a multiple of 128"),
            std::string::npos)
      << last_error();
  EXPECT_NE(last_error().find("serve this layer with f16 or bf16 activations"), std::string::npos)
      << last_error();
  // Integer zero points run (AWQ-style W4A8: q - z as int8 lanes); 8-bit unsigned weights
  // with one do not fit the lanes, which validation says first (rule R10).
  hm_plan_t* zp = plan("w=uint4 zp=uint4 a=int8 c=f16 s=f16:g128 n=256 k=256");
  EXPECT_NE(zp, nullptr);
  hm_plan_destroy(zp);
  EXPECT_EQ(plan("w=uint8 zp=uint8 a=int8 c=f16 s=f16:g128 n=256 k=256",
                 HM_ERROR_UNSUPPORTED_FORMAT),
            nullptr);
  EXPECT_NE(last_error().find("R10"), std::string::npos) << last_error();
  EXPECT_EQ(plan("w=uint4b8 a=int8 c=bf16 s=bf16:channel n=256 k=131072", HM_ERROR_UNSUPPORTED),
            nullptr);
  EXPECT_NE(last_error().find("s32"), std::string::npos) << last_error();
}

TEST_F(PlanApi, FormatsWithoutAKernelAreRefusedAtCreation) {
  EXPECT_EQ(plan("w=e2m1 a=e4m3 c=bf16 s=e4m3:g96 n=256 k=256", HM_ERROR_UNSUPPORTED), nullptr);
  EXPECT_NE(last_error().find("e4m3 activations"), std::string::npos) << last_error();
  // A MoE format no family runs (e4m3 group scales of 96 on e4m3 activations): the families are
  // named with their reason (one reason for all four here).
  EXPECT_EQ(plan("w=e2m1 a=e4m3 c=bf16 s=e4m3:g96 n=256 k=256 e=4", HM_ERROR_UNSUPPORTED), nullptr);
  EXPECT_NE(last_error().find("dense_wgmma, dense_mma, moe_wgmma, moe_mma: "), std::string::npos)
      << last_error();
  EXPECT_NE(last_error().find("group_k 32, 64 or a multiple of 128"), std::string::npos)
      << last_error();
  // Unaligned K on a MoE format: the MoE families say why, the dense ones that they take e=1.
  EXPECT_EQ(plan("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=260 e=4", HM_ERROR_UNSUPPORTED),
            nullptr);
  EXPECT_NE(last_error().find("16-byte units"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("dense kernels take e=1"), std::string::npos) << last_error();
  // Block scales on 16-bit activations stay on mma.sync, whose MoE family runs them.
  hm_plan_t* block = plan("w=e4m3 a=bf16 c=bf16 s=bf16:b128x128 n=256 k=256 e=4");
  ASSERT_NE(block, nullptr);
  char desc[512] = {};
  ASSERT_EQ(hm_plan_describe(block, 16, desc, sizeof desc, nullptr), HM_SUCCESS) << last_error();
  EXPECT_EQ(std::string(desc).rfind("moe_mma ", 0), 0u) << desc;
  hm_plan_destroy(block);
  // The validation rules come first, and name the rule.
  EXPECT_EQ(plan("w=uint4b8 a=f16 c=f16 s=f16:g128 n=0 k=256", HM_ERROR_UNSUPPORTED_FORMAT), nullptr);
}

// max_m bounds what hm_plan_prepare compiles: with max_m = 16 only the first range's kernel is
// built (counted as cubins in the plan's fresh cache), and M beyond it is refused at the call.
TEST_F(PlanApi, PrepareCompilesOnlyTheRangesUpToMaxM) {
  const char* tuning = R"({"dense": [{"max_m": 16, "block_m": 16},
                                     {"max_m": 64, "block_m": 32, "warp_strips": 2},
                                     {"block_m": 64, "warp_strips": 2}]})";
  auto cubins = [&] {
    int count = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(cache_.path()))
      count += e.path().filename() == "kernel.cubin";
    return count;
  };
  const int before = cubins();
  hm_plan_options_t o;
  hm_plan_options_init(&o);
  o.tuning_json = tuning;
  o.max_m = 16;
  hm_format_t* f = nullptr;
  ASSERT_EQ(hm_format_parse("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=512", &f), HM_SUCCESS);
  hm_plan_t* p = nullptr;
  ASSERT_EQ(hm_plan_create(ctx_, f, &o, &p), HM_SUCCESS) << last_error();
  ASSERT_EQ(hm_plan_prepare(p), HM_SUCCESS) << last_error();
  EXPECT_EQ(cubins() - before, 1) << "max_m = 16 needs only the first range's kernel";
  hm_plan_destroy(p);
  o.max_m = 17;  // one token into the second range
  ASSERT_EQ(hm_plan_create(ctx_, f, &o, &p), HM_SUCCESS) << last_error();
  ASSERT_EQ(hm_plan_prepare(p), HM_SUCCESS) << last_error();
  EXPECT_EQ(cubins() - before, 2);
  GemmArguments args(ctx_);
  hm_launch_params_set_int(args.params(), HM_ARG_M, 18);
  EXPECT_EQ(hm_plan_gemm(p, args.params(), nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("max_m"), std::string::npos) << last_error();
  hm_plan_destroy(p);
  hm_format_destroy(f);
}

TEST_F(PlanApi, GemmChecksItsArguments) {
  hm_plan_t* p = plan("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=1024");
  ASSERT_NE(p, nullptr);
  GemmArguments args(ctx_);
  hm_launch_params_t* lp = args.params();
  EXPECT_EQ(hm_plan_gemm(p, lp, nullptr), HM_ERROR_INVALID_STATE);
  EXPECT_NE(last_error().find("hm_plan_prepare"), std::string::npos);
  ASSERT_EQ(hm_plan_prepare(p), HM_SUCCESS) << last_error();

  const uint64_t buf = args.buffer();
  hm_launch_params_set_int(lp, HM_ARG_M, 0);
  EXPECT_EQ(hm_plan_gemm(p, lp, nullptr), HM_ERROR_INVALID_ARGUMENT);
  hm_launch_params_set_int(lp, HM_ARG_M, 1);
  EXPECT_EQ(hm_plan_gemm(p, lp, nullptr), HM_ERROR_INVALID_ARGUMENT);  // no pointers
  EXPECT_NE(last_error().find("HM_ARG_A"), std::string::npos) << last_error();
  hm_launch_params_set_pointer(lp, HM_ARG_A, buf);
  hm_launch_params_set_pointer(lp, HM_ARG_B, buf);
  hm_launch_params_set_pointer(lp, HM_ARG_C, buf);
  EXPECT_EQ(hm_plan_gemm(p, lp, nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("HM_ARG_SCALES"), std::string::npos) << last_error();
  hm_launch_params_set_pointer(lp, HM_ARG_SCALES, buf);
  hm_launch_params_set_pointer(lp, HM_ARG_ZEROS, buf);  // the format has none
  EXPECT_EQ(hm_plan_gemm(p, lp, nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("HM_ARG_ZEROS"), std::string::npos) << last_error();
  hm_launch_params_set_pointer(lp, HM_ARG_ZEROS, 0);
  hm_launch_params_set_pointer(lp, HM_ARG_A, buf + 2);  // 16-byte loads need 16-byte alignment
  EXPECT_EQ(hm_plan_gemm(p, lp, nullptr), HM_ERROR_MISALIGNED);
  hm_launch_params_set_pointer(lp, HM_ARG_A, buf);
  // M = 1 splits K: the workspace is required, and its size is named.
  EXPECT_EQ(hm_plan_gemm(p, lp, nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("workspace"), std::string::npos) << last_error();
  ASSERT_NO_FATAL_FAILURE(args.add_workspace(p, 64));
  EXPECT_GT(args.workspace_bytes(), 0u);
  const auto launch = gemm_launch(p, args);
  ASSERT_TRUE(launch.has_value());
  // The mock's device 0 is a 9.0: M = 1 runs the sm_90a wgmma kernel with 8-token tiles.
  EXPECT_EQ(std::string(launch->function).rfind("hm_dense_wgmma_wg_bm8", 0), 0u) << launch->function;
  EXPECT_GT(launch->grid[2], 1u) << "M = 1 should split K";
  char desc[256];
  ASSERT_EQ(hm_plan_describe(p, 1, desc, sizeof desc, nullptr), HM_SUCCESS);
  EXPECT_NE(std::string(desc).find("dense_wgmma wg_bm8"), std::string::npos) << desc;
  hm_plan_destroy(p);
}

// M is bounded (HM_MAX_M in humming.h) so that the grid arithmetic cannot overflow: M = INT64_MAX
// used to wrap the number of token blocks negative, pass the 65535 check and launch.
TEST_F(PlanApi, GemmRefusesAnMBeyondTheLimit) {
  hm_plan_t* p = plan("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=1024");
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(hm_plan_prepare(p), HM_SUCCESS) << last_error();
  GemmArguments args(ctx_);
  ASSERT_NO_FATAL_FAILURE(args.set_all(p, 64));
  hm::test::MockControl mock;
  for (const int64_t m : {INT64_MAX, INT64_MAX - 7, int64_t{1} << 62, int64_t{1} << 40}) {
    mock.reset();
    hm_launch_params_set_int(args.params(), HM_ARG_M, m);
    EXPECT_NE(hm_plan_gemm(p, args.params(), nullptr), HM_SUCCESS) << m;
    EXPECT_NE(last_error().find(std::to_string(m)), std::string::npos) << last_error();
    EXPECT_FALSE(mock.last_launch().has_value()) << "M = " << m << " launched";
  }
  hm_plan_destroy(p);
}

// A wgmma tile that copies with TMA: the call encodes the activation and weight tensor maps
// (the mock driver checks their arguments as the real one documents them) and launches.
TEST_F(PlanApi, TmaTilesEncodeTheirTensorMapsPerCall) {
  const char* format = "w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=1024";
  hm_plan_t* p = tuned_plan(format, R"({"dense": [{"kernel": "wgmma", "block_m": 64, "warps": 8,
                                      "stages": 4, "pipeline": "mbarrier", "copy": "tma"}]})");
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(hm_plan_prepare(p), HM_SUCCESS) << last_error();
  GemmArguments args(ctx_);
  ASSERT_NO_FATAL_FAILURE(args.set_all(p, 300));
  ASSERT_GT(args.workspace_bytes(), 0u);
  const auto launch = gemm_launch(p, args);
  ASSERT_TRUE(launch.has_value());
  EXPECT_NE(std::string(launch->function).find("_tma"), std::string::npos) << launch->function;
  // The barrier pipeline has no transaction counts for TMA to complete.
  expect_refused(format, R"({"dense": [{"kernel": "wgmma", "block_m": 64, "copy": "tma"}]})",
                 HM_ERROR_PARSE, "mbarrier");
  hm_plan_destroy(p);
}

// sm_90a wgmma kernels are launched programmatically (they wait for the previous kernel on the
// stream themselves, gemm/dense_wgmma.cuh), with or without a cluster; mma.sync kernels in
// stream order.
TEST_F(PlanApi, WgmmaCallsLaunchProgrammatically) {
  const char* format = "w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=1024";
  struct Case {
    const char* tuning;
    int64_t m;
    int programmatic;
    bool clustered;
  };
  const Case cases[] = {
      {R"({"dense": [{"kernel": "wgmma", "block_m": 16, "warps": 4, "stages": 4,
                      "pipeline": "mbarrier", "copy": "tma", "producer": true,
                      "split": "cluster"}]})",
       16, 1, true},
      {R"({"dense": [{"kernel": "wgmma", "block_m": 64}]})", 64, 1, false},
      {R"({"dense": [{"block_m": 16, "warps": 4, "warp_strips": 1}]})", 16, 0, false},
  };
  for (const Case& c : cases) {
    hm_plan_t* p = tuned_plan(format, c.tuning);
    ASSERT_NE(p, nullptr);
    ASSERT_EQ(hm_plan_prepare(p), HM_SUCCESS) << last_error();
    {
      GemmArguments args(ctx_);
      ASSERT_NO_FATAL_FAILURE(args.set_all(p, c.m));
      const auto launch = gemm_launch(p, args);
      ASSERT_TRUE(launch.has_value());
      EXPECT_EQ(launch->programmatic, c.programmatic) << c.tuning;
      EXPECT_EQ(launch->cluster[2] > 1u, c.clustered) << c.tuning;
    }
    hm_plan_destroy(p);
  }
  // HUMMING_DISABLE_PROGRAMMATIC_LAUNCH, read by hm_context_create, turns them into plain
  // stream-ordered launches; a value the boolean parser refuses fails the context.
  {
    hm::test::ScopedEnv off("HUMMING_DISABLE_PROGRAMMATIC_LAUNCH", "1");
    hm_context_t* ctx = hm::test::create_context(cache_.path());
    ASSERT_NE(ctx, nullptr);
    std::swap(ctx, ctx_);
    hm_plan_t* p = tuned_plan(format, cases[0].tuning);
    ASSERT_NE(p, nullptr);
    ASSERT_EQ(hm_plan_prepare(p), HM_SUCCESS) << last_error();
    {
      GemmArguments args(ctx_);
      ASSERT_NO_FATAL_FAILURE(args.set_all(p, cases[0].m));
      const auto launch = gemm_launch(p, args);
      ASSERT_TRUE(launch.has_value());
      EXPECT_EQ(launch->programmatic, 0);
      EXPECT_GT(launch->cluster[2], 1u) << "still a cluster";
    }
    hm_plan_destroy(p);
    std::swap(ctx, ctx_);
    hm_context_destroy(ctx);
  }
  {
    hm::test::ScopedEnv bad("HUMMING_DISABLE_PROGRAMMATIC_LAUNCH", "sometimes");
    hm_context_options_t o;
    hm_context_options_init(&o);
    o.cache_dir = cache_.path().c_str();
    hm_context_t* ctx = nullptr;
    EXPECT_EQ(hm_context_create(&o, &ctx), HM_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("HUMMING_DISABLE_PROGRAMMATIC_LAUNCH"), std::string::npos)
        << last_error();
  }
}

// A tile with a copying warp and cluster split-K: one more warp per block, the K splits launched
// as one cluster along z, and no workspace (the splits meet in shared memory).
TEST_F(PlanApi, ClusterSplitTilesLaunchTheirSplitsAsOneClusterWithoutWorkspace) {
  const char* format = "w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=1024";
  const char* cluster_tile = R"({"dense": [{"kernel": "wgmma", "block_m": 64, "warps": 4,
                                            "stages": 4, "pipeline": "mbarrier", "copy": "tma",
                                            "producer": true, "split": "cluster"}]})";
  hm_plan_t* p = tuned_plan(format, cluster_tile);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(hm_plan_prepare(p), HM_SUCCESS) << last_error();
  uint64_t need = 1;
  ASSERT_EQ(hm_plan_workspace_size(p, 1000, &need), HM_SUCCESS);
  EXPECT_EQ(need, 0u);
  char desc[256];
  ASSERT_EQ(hm_plan_describe(p, 64, desc, sizeof desc, nullptr), HM_SUCCESS);
  EXPECT_NE(std::string(desc).find("wg_bm64_w4_st4_b1_mb_tma_pw_cs"), std::string::npos) << desc;
  EXPECT_NE(std::string(desc).find("cluster split-K"), std::string::npos) << desc;
  {
    GemmArguments args(ctx_);
    ASSERT_NO_FATAL_FAILURE(args.set_all(p, 64));
    ASSERT_EQ(args.workspace_bytes(), 0u) << "the call must pass without a workspace";
    const auto launch = gemm_launch(p, args);
    ASSERT_TRUE(launch.has_value());
    EXPECT_EQ(launch->block[0], 5u * 32u) << "four computing warps and the copying warp";
    EXPECT_GT(launch->grid[2], 1u) << "4 channel blocks on a GPU of many SMs split K";
    EXPECT_LE(launch->grid[2], 8u) << "a cluster holds at most 8 blocks";
    EXPECT_EQ(launch->cluster[0], 1u);
    EXPECT_EQ(launch->cluster[1], 1u);
    EXPECT_EQ(launch->cluster[2], launch->grid[2]);
  }
  hm_plan_destroy(p);
  // A device that cannot hold such clusters (the mock's limit lowered to 2 blocks) fails the
  // prepare, naming the cluster size and the way out, instead of every later call.
  {
    ScopedEnv small_clusters("HM_MOCK_MAX_CLUSTER", "2");
    p = tuned_plan(format, cluster_tile);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(hm_plan_prepare(p), HM_ERROR_UNSUPPORTED);
    EXPECT_NE(last_error().find("cannot run at once"), std::string::npos) << last_error();
    EXPECT_NE(last_error().find("\"split\": \"global\""), std::string::npos) << last_error();
    hm_plan_destroy(p);
  }
  // The copying warp needs TMA; a split is "global" or "cluster".
  expect_refused(format,
                 R"({"dense": [{"kernel": "wgmma", "pipeline": "mbarrier", "producer": true}]})",
                 HM_ERROR_PARSE, "\"copy\": \"tma\"");
  expect_refused(format, R"({"dense": [{"kernel": "wgmma", "split": "dsmem"}]})", HM_ERROR_PARSE,
                 "split");
  // mma.sync: not a choice
  expect_refused(format, R"({"dense": [{"split": "cluster"}]})", HM_ERROR_PARSE);
  // Group slots that are not consecutive rows (g48) are not TMA boxes: no copying warp.
  expect_refused("w=uint4b8 a=f16 c=f16 s=f16:g48 n=256 k=960",
                 R"({"dense": [{"kernel": "wgmma", "pipeline": "mbarrier", "copy": "tma",
                                "producer": true}]})",
                 HM_ERROR_UNSUPPORTED, "copying warp");
}

TEST_F(PlanApi, TuningJsonOverridesTheTilesAndIsChecked) {
  const char* format = "w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=1024";
  expect_tile(format, R"({"dense": [{"block_m": 32, "warps": 2, "warp_strips": 1}]})", 7,
              "bm32_w2_s1");
  expect_refused(format, R"({"dense": [{"block_m": 12}]})", HM_ERROR_PARSE, "block_m");
  expect_refused(format, R"({"dense": [{"blockm": 16}]})", HM_ERROR_PARSE);
  // wgmma tiles: their own limits, and only where the kernel applies.
  expect_tile(format,
              R"({"dense": [{"kernel": "wgmma", "block_m": 256, "warps": 8, "stages": 4}]})", 300,
              "dense_wgmma wg_bm256_w8_st4_b1");
  expect_refused(format, R"({"dense": [{"kernel": "wgmma", "block_m": 16, "warps": 6}]})",
                 HM_ERROR_PARSE, "warps");
  expect_refused(format, R"({"dense": [{"kernel": "tcgen05"}]})", HM_ERROR_PARSE);
  expect_tile(format, R"({"dense": [{"kernel": "wgmma", "pipeline": "mbarrier", "block_m": 64}]})",
              64, "wg_bm64_w4_st4_b1_mb");
  // mma.sync has no such choice
  expect_refused(format, R"({"dense": [{"pipeline": "mbarrier"}]})", HM_ERROR_PARSE);
  expect_tile(format,
              R"({"dense": [{"kernel": "wgmma", "block_m": 64, "stages": 3,
                             "dequant_ahead": true}]})",
              64, "wg_bm64_w4_st3_b1_da");
  // A barrier step that dequantizes ahead reads two stages and refills a third.
  expect_refused(format,
                 R"({"dense": [{"kernel": "wgmma", "block_m": 64, "stages": 2,
                                "dequant_ahead": true}]})",
                 HM_ERROR_PARSE, "stages >= 3");
  expect_refused(format, R"({"dense": [{"kernel": "wgmma", "dequant_ahead": 1}]})", HM_ERROR_PARSE);
  // mma.sync: not a choice either
  expect_refused(format, R"({"dense": [{"dequant_ahead": false}]})", HM_ERROR_PARSE);
  // Integer wgmma takes 8..32 tokens, then multiples of 16 (a 40-token int8 tile is an illegal
  // instruction shape: refused at creation, not a ptxas error at prepare); float inputs take 40.
  const char* int8 = "w=uint4b8 a=int8 c=bf16 s=bf16:channel n=256 k=1024";
  expect_refused(int8, R"({"dense": [{"kernel": "wgmma", "block_m": 40, "warps": 8}]})",
                 HM_ERROR_UNSUPPORTED, "multiples of 16");
  for (int tokens : {8, 24, 32, 48, 80, 256}) {
    const std::string tuning =
        R"({"dense": [{"kernel": "wgmma", "block_m": )" + std::to_string(tokens) + "}]}";
    expect_tile(int8, tuning.c_str(), 1, ("wg_bm" + std::to_string(tokens) + "_").c_str());
  }
  expect_tile("w=e2m1 a=e4m3 c=bf16 s=bf16:channel n=256 k=1024",
              R"({"dense": [{"kernel": "wgmma", "block_m": 40, "warps": 8}]})", 1, "wg_bm40_w8");
  // Block scales and K % 8 != 0 stay on mma.sync: asking for wgmma is an error, not a fallback.
  for (const char* text : {"w=e4m3 a=bf16 c=bf16 s=bf16:b128x128 n=256 k=1024",
                           "w=uint4b8 a=f16 c=f16 s=f16:g16 n=256 k=1020"}) {
    expect_refused(text, R"({"dense": [{"kernel": "wgmma", "block_m": 64}]})", HM_ERROR_UNSUPPORTED,
                   "\"kernel\": \"mma\"");
  }
}

}  // namespace

namespace {

// The indexed MoE family on the mock: the routing queries, the routing slots and the grid that
// covers every slot SORTED_IDS can hold.
class MoePlanApi : public hm::test::MockPlanTest {};

TEST_F(MoePlanApi, RoutingQueriesAndArguments) {
  hm_plan_t* p = plan("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=512 e=8");
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(hm_plan_prepare(p), HM_SUCCESS) << last_error();
  char desc[256];
  ASSERT_EQ(hm_plan_describe(p, 4, desc, sizeof desc, nullptr), HM_SUCCESS) << last_error();
  EXPECT_EQ(std::string(desc).rfind("moe_wgmma ", 0), 0u) << desc;
  int32_t block = 0;
  ASSERT_EQ(hm_plan_moe_block_size(p, 4, &block), HM_SUCCESS) << last_error();
  EXPECT_EQ(block, 8);
  int64_t rows = 0;
  ASSERT_EQ(hm_plan_moe_rows(p, 4, 2, &rows), HM_SUCCESS) << last_error();
  EXPECT_EQ(rows, (4 * 2 + 8 * 7 + 7) / 8 * 8);  // every assignment, 7 padding per expert
  int64_t refused = 0;
  EXPECT_EQ(hm_plan_moe_rows(p, 4, 0, &refused), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hm_plan_moe_rows(p, 4, HM_MAX_TOP_K + 1, &refused), HM_ERROR_INVALID_ARGUMENT);
  uint64_t ws = 1;
  ASSERT_EQ(hm_plan_workspace_size(p, 5000, &ws), HM_SUCCESS);
  EXPECT_EQ(ws, 0u) << "MoE tiles split K only within clusters";

  GemmArguments args(ctx_);
  ASSERT_NO_FATAL_FAILURE(args.set_all(p, 4));
  // The routing slots are required, and TOP_K in range.
  EXPECT_EQ(hm_plan_gemm(p, args.params(), nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("HM_ARG_SORTED_IDS is not set"), std::string::npos) << last_error();
  for (int32_t slot : {HM_ARG_SORTED_IDS, HM_ARG_EXPERT_IDS, HM_ARG_NUM_TOKENS_PADDED})
    hm_launch_params_set_pointer(args.params(), slot, args.buffer());
  EXPECT_EQ(hm_plan_gemm(p, args.params(), nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("HM_ARG_TOP_K"), std::string::npos) << last_error();
  hm_launch_params_set_int(args.params(), HM_ARG_TOP_K, 2);
  hm_launch_params_set_pointer(args.params(), HM_ARG_EXPERT_IDS, args.buffer() + 2);
  EXPECT_EQ(hm_plan_gemm(p, args.params(), nullptr), HM_ERROR_MISALIGNED);
  hm_launch_params_set_pointer(args.params(), HM_ARG_EXPERT_IDS, args.buffer());
  const auto launch = gemm_launch(p, args);
  ASSERT_TRUE(launch.has_value());
  EXPECT_EQ(launch->grid[0], 256u / 64u);
  // A block per slot block, but never more than M * top_k (each block with rows has one).
  EXPECT_EQ(launch->grid[1], static_cast<uint32_t>(std::min<int64_t>(rows / block, 4 * 2)));
  hm_plan_destroy(p);

  // A dense plan has no routing; a dense plan refuses the routing slots.
  hm_plan_t* dense = plan("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=512");
  ASSERT_NE(dense, nullptr);
  EXPECT_EQ(hm_plan_moe_block_size(dense, 4, &block), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("dense"), std::string::npos) << last_error();
  ASSERT_EQ(hm_plan_prepare(dense), HM_SUCCESS) << last_error();
  GemmArguments dense_args(ctx_);
  ASSERT_NO_FATAL_FAILURE(dense_args.set_all(dense, 4));
  hm_launch_params_set_pointer(dense_args.params(), HM_ARG_SORTED_IDS, dense_args.buffer());
  EXPECT_EQ(hm_plan_gemm(dense, dense_args.params(), nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("HM_ARG_SORTED_IDS is set"), std::string::npos) << last_error();
  hm_plan_destroy(dense);
}

}  // namespace
