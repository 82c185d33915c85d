// The plan half of the C ABI on the mock driver: creation rules, prepare, workspace sizing and
// every argument check of hm_plan_gemm (the mock records the launch; GPU tests check results).
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "humming.h"
#include "mock_driver/mock_loader.hpp"

namespace {

std::string last_error() {
  size_t n = hm_last_error_message(nullptr, 0);
  std::string s(n, '\0');
  if (n) hm_last_error_message(&s[0], n + 1);
  return s;
}

class PlanApi : public testing::Test {
 protected:
  void SetUp() override {
    setenv("HUMMING_CUDA_DRIVER_PATH", HM_MOCK_DRIVER_PATH, 1);
    char dir[] = "/tmp/humming-plan-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    cache_ = dir;
    hm_context_options_t o;
    hm_context_options_init(&o);
    o.cache_dir = cache_.c_str();
    ASSERT_EQ(hm_context_create(&o, &ctx_), HM_SUCCESS) << last_error();
  }
  void TearDown() override {
    hm_context_destroy(ctx_);
    std::string rm = "rm -rf '" + cache_ + "'";
    EXPECT_EQ(std::system(rm.c_str()), 0);
  }
  hm_plan_t* plan(const char* text, hm_status_t expect = HM_SUCCESS) {
    hm_format_t* f = nullptr;
    EXPECT_EQ(hm_format_parse(text, &f), HM_SUCCESS) << last_error();
    hm_plan_t* p = nullptr;
    EXPECT_EQ(hm_plan_create(ctx_, f, nullptr, &p), expect) << text << ": " << last_error();
    hm_format_destroy(f);
    return p;
  }
  hm_context_t* ctx_ = nullptr;
  std::string cache_;
};

TEST_F(PlanApi, FormatsWithoutAKernelAreRefusedAtCreation) {
  EXPECT_EQ(plan("w=e2m1 a=e4m3 c=bf16 s=e4m3:g32 n=256 k=256", HM_ERROR_UNSUPPORTED), nullptr);
  EXPECT_NE(last_error().find("e4m3 activations"), std::string::npos) << last_error();
  EXPECT_EQ(plan("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=256 e=4", HM_ERROR_UNSUPPORTED), nullptr);
  EXPECT_NE(last_error().find("MoE"), std::string::npos) << last_error();
  // The validation rules come first, and name the rule.
  EXPECT_EQ(plan("w=uint4b8 a=f16 c=f16 s=f16:g128 n=0 k=256", HM_ERROR_UNSUPPORTED_FORMAT), nullptr);
}

TEST_F(PlanApi, GemmChecksItsArguments) {
  hm_plan_t* p = plan("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=1024");
  ASSERT_NE(p, nullptr);
  hm_launch_params_t* lp = nullptr;
  ASSERT_EQ(hm_launch_params_create(&lp), HM_SUCCESS);
  EXPECT_EQ(hm_plan_gemm(p, lp, nullptr), HM_ERROR_INVALID_STATE);
  EXPECT_NE(last_error().find("hm_plan_prepare"), std::string::npos);
  ASSERT_EQ(hm_plan_prepare(p), HM_SUCCESS) << last_error();

  uint64_t buf = 0;
  ASSERT_EQ(hm_device_alloc(ctx_, 1 << 20, &buf), HM_SUCCESS);
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
  uint64_t need = 0;
  ASSERT_EQ(hm_plan_workspace_size(p, 64, &need), HM_SUCCESS);
  EXPECT_GT(need, 0u);
  uint64_t ws = 0;
  ASSERT_EQ(hm_device_alloc(ctx_, need, &ws), HM_SUCCESS);
  hm_launch_params_set_pointer(lp, HM_ARG_WORKSPACE, ws);
  hm_launch_params_set_int(lp, HM_ARG_WORKSPACE_BYTES, static_cast<int64_t>(need));
  hm::test::MockControl mock;
  mock.reset();
  EXPECT_EQ(hm_plan_gemm(p, lp, nullptr), HM_SUCCESS) << last_error();
  auto launch = mock.last_launch();
  ASSERT_TRUE(launch.has_value());
  // The mock's device 0 is a 9.0: M = 1 runs the sm_90a wgmma kernel with 8-token tiles.
  EXPECT_EQ(std::string(launch->function).rfind("hm_dense_wgmma_wg_bm8", 0), 0u) << launch->function;
  EXPECT_GT(launch->grid[2], 1u) << "M = 1 should split K";
  char desc[256];
  ASSERT_EQ(hm_plan_describe(p, 1, desc, sizeof desc, nullptr), HM_SUCCESS);
  EXPECT_NE(std::string(desc).find("dense_wgmma wg_bm8"), std::string::npos) << desc;
  hm_device_free(ctx_, ws);
  hm_device_free(ctx_, buf);
  hm_launch_params_destroy(lp);
  hm_plan_destroy(p);
}

// A wgmma tile that copies with TMA: the call encodes the activation and weight tensor maps
// (the mock driver checks their arguments as the real one documents them) and launches.
TEST_F(PlanApi, TmaTilesEncodeTheirTensorMapsPerCall) {
  hm_format_t* f = nullptr;
  ASSERT_EQ(hm_format_parse("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=1024", &f), HM_SUCCESS);
  hm_plan_options_t o;
  hm_plan_options_init(&o);
  o.tuning_json = R"({"dense": [{"kernel": "wgmma", "block_m": 64, "warps": 8, "stages": 4,
                                 "pipeline": "mbarrier", "copy": "tma"}]})";
  hm_plan_t* p = nullptr;
  ASSERT_EQ(hm_plan_create(ctx_, f, &o, &p), HM_SUCCESS) << last_error();
  hm_format_destroy(f);
  ASSERT_EQ(hm_plan_prepare(p), HM_SUCCESS) << last_error();
  uint64_t buf = 0;
  ASSERT_EQ(hm_device_alloc(ctx_, 1 << 20, &buf), HM_SUCCESS);
  hm_launch_params_t* lp = nullptr;
  ASSERT_EQ(hm_launch_params_create(&lp), HM_SUCCESS);
  hm_launch_params_set_int(lp, HM_ARG_M, 300);
  uint64_t need = 0, ws = 0;
  ASSERT_EQ(hm_plan_workspace_size(p, 300, &need), HM_SUCCESS);
  ASSERT_EQ(hm_device_alloc(ctx_, need, &ws), HM_SUCCESS);
  hm_launch_params_set_pointer(lp, HM_ARG_WORKSPACE, ws);
  hm_launch_params_set_int(lp, HM_ARG_WORKSPACE_BYTES, static_cast<int64_t>(need));
  hm_launch_params_set_pointer(lp, HM_ARG_A, buf);
  hm_launch_params_set_pointer(lp, HM_ARG_B, buf);
  hm_launch_params_set_pointer(lp, HM_ARG_C, buf);
  hm_launch_params_set_pointer(lp, HM_ARG_SCALES, buf);
  hm::test::MockControl mock;
  mock.reset();
  EXPECT_EQ(hm_plan_gemm(p, lp, nullptr), HM_SUCCESS) << last_error();
  auto launch = mock.last_launch();
  ASSERT_TRUE(launch.has_value());
  EXPECT_NE(std::string(launch->function).find("_tma"), std::string::npos) << launch->function;
  // The barrier pipeline has no transaction counts for TMA to complete.
  o.tuning_json = R"({"dense": [{"kernel": "wgmma", "block_m": 64, "copy": "tma"}]})";
  ASSERT_EQ(hm_format_parse("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=1024", &f), HM_SUCCESS);
  hm_plan_t* q = nullptr;
  EXPECT_EQ(hm_plan_create(ctx_, f, &o, &q), HM_ERROR_PARSE);
  EXPECT_NE(last_error().find("mbarrier"), std::string::npos) << last_error();
  hm_format_destroy(f);
  hm_device_free(ctx_, ws);
  hm_device_free(ctx_, buf);
  hm_launch_params_destroy(lp);
  hm_plan_destroy(p);
}

// A tile with a copying warp and cluster split-K: one more warp per block, the K splits launched
// as one cluster along z, and no workspace (the splits meet in shared memory).
TEST_F(PlanApi, ClusterSplitTilesLaunchTheirSplitsAsOneClusterWithoutWorkspace) {
  hm_format_t* f = nullptr;
  ASSERT_EQ(hm_format_parse("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=1024", &f), HM_SUCCESS);
  hm_plan_options_t o;
  hm_plan_options_init(&o);
  o.tuning_json = R"({"dense": [{"kernel": "wgmma", "block_m": 64, "warps": 4, "stages": 4,
                                 "pipeline": "mbarrier", "copy": "tma", "producer": true,
                                 "split": "cluster"}]})";
  hm_plan_t* p = nullptr;
  ASSERT_EQ(hm_plan_create(ctx_, f, &o, &p), HM_SUCCESS) << last_error();
  ASSERT_EQ(hm_plan_prepare(p), HM_SUCCESS) << last_error();
  uint64_t need = 1;
  ASSERT_EQ(hm_plan_workspace_size(p, 1000, &need), HM_SUCCESS);
  EXPECT_EQ(need, 0u);
  char desc[256];
  ASSERT_EQ(hm_plan_describe(p, 64, desc, sizeof desc, nullptr), HM_SUCCESS);
  EXPECT_NE(std::string(desc).find("wg_bm64_w4_st4_mb_tma_pw_cs"), std::string::npos) << desc;
  EXPECT_NE(std::string(desc).find("cluster split-K"), std::string::npos) << desc;
  uint64_t buf = 0;
  ASSERT_EQ(hm_device_alloc(ctx_, 1 << 20, &buf), HM_SUCCESS);
  hm_launch_params_t* lp = nullptr;
  ASSERT_EQ(hm_launch_params_create(&lp), HM_SUCCESS);
  hm_launch_params_set_int(lp, HM_ARG_M, 64);
  for (int arg : {HM_ARG_A, HM_ARG_B, HM_ARG_C, HM_ARG_SCALES})
    hm_launch_params_set_pointer(lp, arg, buf);
  hm::test::MockControl mock;
  mock.reset();
  EXPECT_EQ(hm_plan_gemm(p, lp, nullptr), HM_SUCCESS) << last_error();
  auto launch = mock.last_launch();
  ASSERT_TRUE(launch.has_value());
  EXPECT_EQ(launch->block[0], 5u * 32u) << "four computing warps and the copying warp";
  EXPECT_GT(launch->grid[2], 1u) << "4 channel blocks on a GPU of many SMs split K";
  EXPECT_LE(launch->grid[2], 8u) << "a cluster holds at most 8 blocks";
  EXPECT_EQ(launch->cluster[0], 1u);
  EXPECT_EQ(launch->cluster[1], 1u);
  EXPECT_EQ(launch->cluster[2], launch->grid[2]);
  hm_device_free(ctx_, buf);
  hm_launch_params_destroy(lp);
  hm_plan_destroy(p);
  // A device that cannot hold such clusters (the mock's limit lowered to 2 blocks) fails the
  // prepare, naming the cluster size and the way out, instead of every later call.
  ASSERT_EQ(setenv("HM_MOCK_MAX_CLUSTER", "2", 1), 0);
  ASSERT_EQ(hm_plan_create(ctx_, f, &o, &p), HM_SUCCESS) << last_error();
  EXPECT_EQ(hm_plan_prepare(p), HM_ERROR_UNSUPPORTED);
  EXPECT_NE(last_error().find("cannot run at once"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("\"split\": \"global\""), std::string::npos) << last_error();
  hm_plan_destroy(p);
  ASSERT_EQ(unsetenv("HM_MOCK_MAX_CLUSTER"), 0);
  // The copying warp needs TMA; a split is "global" or "cluster".
  o.tuning_json = R"({"dense": [{"kernel": "wgmma", "pipeline": "mbarrier", "producer": true}]})";
  EXPECT_EQ(hm_plan_create(ctx_, f, &o, &p), HM_ERROR_PARSE);
  EXPECT_NE(last_error().find("\"copy\": \"tma\""), std::string::npos) << last_error();
  o.tuning_json = R"({"dense": [{"kernel": "wgmma", "split": "dsmem"}]})";
  EXPECT_EQ(hm_plan_create(ctx_, f, &o, &p), HM_ERROR_PARSE);
  EXPECT_NE(last_error().find("split"), std::string::npos) << last_error();
  o.tuning_json = R"({"dense": [{"split": "cluster"}]})";  // mma.sync: not a choice
  EXPECT_EQ(hm_plan_create(ctx_, f, &o, &p), HM_ERROR_PARSE);
  hm_format_destroy(f);
  // Group slots that are not consecutive rows (g48) are not TMA boxes: no copying warp.
  ASSERT_EQ(hm_format_parse("w=uint4b8 a=f16 c=f16 s=f16:g48 n=256 k=960", &f), HM_SUCCESS);
  o.tuning_json = R"({"dense": [{"kernel": "wgmma", "pipeline": "mbarrier", "copy": "tma",
                                 "producer": true}]})";
  EXPECT_EQ(hm_plan_create(ctx_, f, &o, &p), HM_ERROR_UNSUPPORTED);
  EXPECT_NE(last_error().find("copying warp"), std::string::npos) << last_error();
  hm_format_destroy(f);
}

TEST_F(PlanApi, TuningJsonOverridesTheTilesAndIsChecked) {
  hm_format_t* f = nullptr;
  ASSERT_EQ(hm_format_parse("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=1024", &f), HM_SUCCESS);
  hm_plan_options_t o;
  hm_plan_options_init(&o);
  o.tuning_json = R"({"dense": [{"block_m": 32, "warps": 2, "warp_strips": 1}]})";
  hm_plan_t* p = nullptr;
  ASSERT_EQ(hm_plan_create(ctx_, f, &o, &p), HM_SUCCESS) << last_error();
  char desc[256];
  ASSERT_EQ(hm_plan_describe(p, 7, desc, sizeof desc, nullptr), HM_SUCCESS);
  EXPECT_NE(std::string(desc).find("bm32_w2_s1"), std::string::npos) << desc;
  hm_plan_destroy(p);
  o.tuning_json = R"({"dense": [{"block_m": 12}]})";
  EXPECT_EQ(hm_plan_create(ctx_, f, &o, &p), HM_ERROR_PARSE);
  EXPECT_NE(last_error().find("block_m"), std::string::npos) << last_error();
  o.tuning_json = R"({"dense": [{"blockm": 16}]})";
  EXPECT_EQ(hm_plan_create(ctx_, f, &o, &p), HM_ERROR_PARSE);
  // wgmma tiles: their own limits, and only where the kernel applies.
  o.tuning_json = R"({"dense": [{"kernel": "wgmma", "block_m": 256, "warps": 8, "stages": 4}]})";
  ASSERT_EQ(hm_plan_create(ctx_, f, &o, &p), HM_SUCCESS) << last_error();
  ASSERT_EQ(hm_plan_describe(p, 300, desc, sizeof desc, nullptr), HM_SUCCESS);
  EXPECT_NE(std::string(desc).find("dense_wgmma wg_bm256_w8_st4"), std::string::npos) << desc;
  hm_plan_destroy(p);
  o.tuning_json = R"({"dense": [{"kernel": "wgmma", "block_m": 16, "warps": 6}]})";
  EXPECT_EQ(hm_plan_create(ctx_, f, &o, &p), HM_ERROR_PARSE);
  EXPECT_NE(last_error().find("warps"), std::string::npos) << last_error();
  o.tuning_json = R"({"dense": [{"kernel": "tcgen05"}]})";
  EXPECT_EQ(hm_plan_create(ctx_, f, &o, &p), HM_ERROR_PARSE);
  o.tuning_json = R"({"dense": [{"kernel": "wgmma", "pipeline": "mbarrier", "block_m": 64}]})";
  ASSERT_EQ(hm_plan_create(ctx_, f, &o, &p), HM_SUCCESS) << last_error();
  ASSERT_EQ(hm_plan_describe(p, 64, desc, sizeof desc, nullptr), HM_SUCCESS);
  EXPECT_NE(std::string(desc).find("wg_bm64_w4_st4_mb"), std::string::npos) << desc;
  hm_plan_destroy(p);
  o.tuning_json = R"({"dense": [{"pipeline": "mbarrier"}]})";  // mma.sync has no such choice
  EXPECT_EQ(hm_plan_create(ctx_, f, &o, &p), HM_ERROR_PARSE);
  o.tuning_json =
      R"({"dense": [{"kernel": "wgmma", "block_m": 64, "stages": 3, "dequant_ahead": true}]})";
  ASSERT_EQ(hm_plan_create(ctx_, f, &o, &p), HM_SUCCESS) << last_error();
  ASSERT_EQ(hm_plan_describe(p, 64, desc, sizeof desc, nullptr), HM_SUCCESS);
  EXPECT_NE(std::string(desc).find("wg_bm64_w4_st3_da"), std::string::npos) << desc;
  hm_plan_destroy(p);
  // A barrier step that dequantizes ahead reads two stages and refills a third.
  o.tuning_json =
      R"({"dense": [{"kernel": "wgmma", "block_m": 64, "stages": 2, "dequant_ahead": true}]})";
  EXPECT_EQ(hm_plan_create(ctx_, f, &o, &p), HM_ERROR_PARSE);
  EXPECT_NE(last_error().find("stages >= 3"), std::string::npos) << last_error();
  o.tuning_json = R"({"dense": [{"kernel": "wgmma", "dequant_ahead": 1}]})";
  EXPECT_EQ(hm_plan_create(ctx_, f, &o, &p), HM_ERROR_PARSE);
  o.tuning_json = R"({"dense": [{"dequant_ahead": false}]})";  // mma.sync: not a choice either
  EXPECT_EQ(hm_plan_create(ctx_, f, &o, &p), HM_ERROR_PARSE);
  hm_format_destroy(f);
  // Block scales and K % 8 != 0 stay on mma.sync: asking for wgmma is an error, not a fallback.
  o.tuning_json = R"({"dense": [{"kernel": "wgmma", "block_m": 64}]})";
  for (const char* text : {"w=e4m3 a=bf16 c=bf16 s=bf16:b128x128 n=256 k=1024",
                           "w=uint4b8 a=f16 c=f16 s=f16:g16 n=256 k=1020"}) {
    ASSERT_EQ(hm_format_parse(text, &f), HM_SUCCESS) << last_error();
    EXPECT_EQ(hm_plan_create(ctx_, f, &o, &p), HM_ERROR_UNSUPPORTED) << text;
    EXPECT_NE(last_error().find("\"kernel\": \"mma\""), std::string::npos) << last_error();
    hm_format_destroy(f);
  }
}

}  // namespace
