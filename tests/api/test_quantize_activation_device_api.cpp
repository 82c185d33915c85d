// hm_quantize_activation_device on the mock driver: every argument check, the launch it reaches
// (entry, grid, block) and whole quantizations compared bit for bit with hm_quantize_activation.
// The mock runs the rule's own per-row function (kernels/humming/quant/activation.h) on the host,
// so this checks the launcher and the argument marshalling; the kernel's thread mapping is checked
// on a GPU (tests/gpu/test_activation_quant_gpu.cpp).
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/support/mock_driver_test.hpp"
#include "humming.h"
#include "mock_driver/mock_loader.hpp"

namespace {

using hm::test::last_error;
using hm::test::TemporaryDirectory;

class QuantizeActivationDeviceApi : public hm::test::MockDriverTest {
 protected:
  static void SetUpTestSuite() { cache_ = new TemporaryDirectory("humming-actquant-test"); }
  static void TearDownTestSuite() {
    delete cache_;
    cache_ = nullptr;
  }
  void SetUp() override {
    ctx_ = context(0);
    ASSERT_NE(ctx_, nullptr);
  }
  void TearDown() override { hm_context_destroy(ctx_); }
  static hm_context_t* context(int device, const char* arch = nullptr) {
    return hm::test::create_context(cache_->path(), device, arch);
  }
  static TemporaryDirectory* cache_;
  hm_context_t* ctx_ = nullptr;
};
TemporaryDirectory* QuantizeActivationDeviceApi::cache_ = nullptr;

#define EXPECT_QUANT_FAILS(call, status, needle)                                \
  do {                                                                          \
    EXPECT_EQ((call), (status)) << #call;                                       \
    EXPECT_NE(last_error().find(needle), std::string::npos) << last_error();    \
  } while (0)

// f32 -> bf16 bits by truncation (exact for the values the tests use) and f16 bits via the
// library's own encoder.
uint16_t to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return static_cast<uint16_t>(u >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t u = uint32_t{h} << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
uint16_t to_f16(float x, float* back) {
  uint32_t code = 0;
  double value = 0;
  EXPECT_EQ(hm_dtype_encode(HM_DTYPE_F16, x, &code), HM_SUCCESS);
  EXPECT_EQ(hm_dtype_decode(HM_DTYPE_F16, code, &value), HM_SUCCESS);
  *back = static_cast<float>(value);
  return static_cast<uint16_t>(code);
}

TEST_F(QuantizeActivationDeviceApi, InitAndScaleGroups) {
  hm_activation_quant_args_t args;
  std::memset(&args, 0xFF, sizeof args);
  hm_activation_quant_args_init(&args);
  EXPECT_EQ(args.struct_size, sizeof args);
  EXPECT_EQ(args.in_dtype, HM_DTYPE_F16);
  EXPECT_EQ(args.out_dtype, HM_DTYPE_E4M3);
  EXPECT_EQ(args.group_k, 0);
  EXPECT_EQ(args.m | args.k | int64_t(args.a | args.perm | args.codes | args.scales), 0);
  hm_activation_quant_args_init(nullptr);
  int64_t g = -1;
  EXPECT_EQ(hm_activation_scale_groups(8192, 0, &g), HM_SUCCESS);
  EXPECT_EQ(g, 1);
  EXPECT_EQ(hm_activation_scale_groups(7000, 128, &g), HM_SUCCESS);
  EXPECT_EQ(g, 55);
  EXPECT_EQ(hm_activation_scale_groups(0, 128, &g), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hm_activation_scale_groups(64, -8, &g), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hm_activation_scale_groups(64, 0, nullptr), HM_ERROR_INVALID_ARGUMENT);
}

TEST_F(QuantizeActivationDeviceApi, ChecksEveryArgumentAndLaunchesOneBlockPerRow) {
  uint64_t buf = 0;
  ASSERT_EQ(hm_device_alloc(ctx_, 1 << 20, &buf), HM_SUCCESS);
  hm_activation_quant_args_t args;
  hm_activation_quant_args_init(&args);
  args.m = 3;
  args.k = 256;
  args.group_k = 128;
  args.a = buf;
  args.codes = buf + 65536;
  args.scales = buf + 131072;

  EXPECT_QUANT_FAILS(hm_quantize_activation_device(nullptr, &args, nullptr),
                     HM_ERROR_INVALID_ARGUMENT, "'context'");
  EXPECT_QUANT_FAILS(hm_quantize_activation_device(ctx_, nullptr, nullptr),
                     HM_ERROR_INVALID_ARGUMENT, "'args'");
  using Args = hm_activation_quant_args_t;
  const auto expect_refused = [&](hm_status_t status, const char* needle, const auto& edit) {
    SCOPED_TRACE(needle);
    Args edited = args;
    edit(edited);
    EXPECT_QUANT_FAILS(hm_quantize_activation_device(ctx_, &edited, nullptr), status, needle);
  };
  expect_refused(HM_ERROR_INVALID_STRUCT_SIZE, "args", [](Args& a) { a.struct_size = 4; });
  expect_refused(HM_ERROR_UNSUPPORTED_FORMAT, "f32",
                 [](Args& a) { a.in_dtype = HM_DTYPE_F32; });
  expect_refused(HM_ERROR_UNSUPPORTED_FORMAT, "int4",
                 [](Args& a) { a.out_dtype = HM_DTYPE_INT4; });
  expect_refused(HM_ERROR_UNSUPPORTED_FORMAT, "uint8",
                 [](Args& a) { a.out_dtype = HM_DTYPE_UINT8; });
  expect_refused(HM_ERROR_INVALID_ARGUMENT, "args->m", [](Args& a) { a.m = -1; });
  expect_refused(HM_ERROR_INVALID_ARGUMENT, "k must be positive", [](Args& a) { a.k = 0; });
  // The kernel indexes a row with 32 bits (activation.h); a GEMM's K is below 2^31 as well.
  expect_refused(HM_ERROR_INVALID_ARGUMENT, "at most 2^31 - 1", [](Args& a) {
    a.m = 1;
    a.k = int64_t{1} << 31;
  });
  expect_refused(HM_ERROR_INVALID_ARGUMENT, "group_k", [](Args& a) { a.group_k = -128; });
  expect_refused(HM_ERROR_INVALID_ARGUMENT, "multiple of 8", [](Args& a) { a.group_k = 100; });
  expect_refused(HM_ERROR_INVALID_ARGUMENT, "does not fit", [](Args& a) {
    a.m = int64_t{1} << 40;
    a.k = int64_t{1} << 40;
  });
  expect_refused(HM_ERROR_INVALID_ARGUMENT, "args->a", [](Args& a) { a.a = 0; });
  expect_refused(HM_ERROR_INVALID_ARGUMENT, "args->codes", [](Args& a) { a.codes = 0; });
  expect_refused(HM_ERROR_INVALID_ARGUMENT, "args->scales", [](Args& a) { a.scales = 0; });
  expect_refused(HM_ERROR_MISALIGNED, "args->a must be 2-byte aligned",
                 [&](Args& a) { a.a = buf + 1; });
  expect_refused(HM_ERROR_MISALIGNED, "args->perm must be 4-byte aligned",
                 [&](Args& a) { a.perm = buf + 200002; });
  expect_refused(HM_ERROR_MISALIGNED, "args->scales must be 4-byte aligned",
                 [&](Args& a) { a.scales = buf + 131074; });

  // Memory of another device (the mock's device 1) is named.
  hm_context_t* other = context(1);
  ASSERT_NE(other, nullptr);
  uint64_t foreign = 0;
  ASSERT_EQ(hm_device_alloc(other, 1 << 16, &foreign), HM_SUCCESS);
  expect_refused(HM_ERROR_WRONG_DEVICE, "args->codes", [&](Args& a) { a.codes = foreign; });
  hm_device_free(other, foreign);
  hm_context_destroy(other);

  hm::test::MockControl mock;
  mock.reset();
  EXPECT_EQ(hm_quantize_activation_device(ctx_, &args, nullptr), HM_SUCCESS) << last_error();
  auto launch = mock.last_launch();
  ASSERT_TRUE(launch.has_value());
  EXPECT_EQ(std::string(launch->function), "hm_quantize_activation_f16_e4m3");
  // Few rows (3 of the mock's SMs): a 256-column row is one pass of one warp, one block each.
  EXPECT_EQ(launch->grid[0], 3u) << "one block per row";
  EXPECT_EQ(launch->block[0], 32u) << "one warp per 256-column pass";
  EXPECT_EQ(launch->executed, 1);
  EXPECT_EQ(mock.launch_count(), 1);

  // m = 0 launches nothing; odd addresses of codes are fine.
  mock.reset();
  Args empty = args;
  empty.m = 0;
  EXPECT_EQ(hm_quantize_activation_device(ctx_, &empty, nullptr), HM_SUCCESS) << last_error();
  EXPECT_EQ(mock.launch_count(), 0);
  Args odd = args;
  odd.codes = buf + 65537;
  odd.out_dtype = HM_DTYPE_INT8;
  odd.in_dtype = HM_DTYPE_BF16;
  EXPECT_EQ(hm_quantize_activation_device(ctx_, &odd, nullptr), HM_SUCCESS) << last_error();
  launch = mock.last_launch();
  ASSERT_TRUE(launch.has_value());
  EXPECT_EQ(std::string(launch->function), "hm_quantize_activation_bf16_int8");
  hm_device_free(ctx_, buf);
}

// Per-token rows of a call with at most one row per SM run on sm_90+ as thread-block clusters,
// one row per cluster (src/api/quant_device.cpp, plan_cluster_rows); other calls as before.
TEST_F(QuantizeActivationDeviceApi, PerTokenFewRowsLaunchAsClustersOnSm90) {
  uint64_t buf = 0;
  ASSERT_EQ(hm_device_alloc(ctx_, 8 << 20, &buf), HM_SUCCESS);
  struct Case {
    int64_t m, k;
    int32_t group_k;
    bool perm;
    unsigned grid, block, cluster;  // cluster 1: a plain launch
  };
  const Case cases[] = {
      {3, 8192, 0, false, 24, 128, 8},      // 8 blocks of 128 threads per row
      {16, 8192, 0, false, 128, 128, 8},    // 128 blocks: each on an SM of the 132
      {17, 8192, 0, false, 119, 160, 7},    // 132 / 17 = 7 blocks per row, 147 vectors each
      {32, 8192, 0, false, 128, 256, 4},    // 4
      {33, 4096, 0, false, 132, 128, 4},    // 4 blocks per row, exactly every SM
      {34, 4096, 0, false, 102, 192, 3},    // 3
      {64, 8192, 0, false, 128, 256, 2},    // 2 blocks of 512 vectors: 2 per thread
      {128, 8192, 0, false, 128, 256, 1},   // one block of 1024 vectors: 4 per thread
      {132, 8192, 0, false, 132, 256, 1},   // one row per SM, every SM
      {133, 8192, 0, false, 0, 0, 1},       // more rows than SMs: the team path
      {2, 7168, 0, false, 14, 128, 7},      // 7
      {1, 14336, 0, false, 8, 224, 8},      // wider blocks past K = 8192
      {1, 8, 0, false, 1, 32, 1},           // one vector: a cluster of one block
      {1, 65544, 0, false, 8, 288, 8},      // 1025 vectors per block: 4 per thread
      {1, 262144, 0, false, 8, 1024, 8},    // the longest: 8 x 1024 threads x 4 vectors
      {1, 262152, 0, false, 1, 1024, 1},    // one vector longer: one block per row
      {3, 8192, 128, false, 0, 0, 1},       // per group: the lane path (grid not checked)
      {3, 8192, 0, true, 3, 1024, 1},       // a permutation: gathered, one block per row
  };
  std::vector<int32_t> perm(8192);
  for (size_t j = 0; j < perm.size(); ++j) perm[j] = static_cast<int32_t>(j);
  const uint64_t d_perm = buf + (6 << 20);
  ASSERT_EQ(hm_copy_to_device(ctx_, d_perm, perm.data(), 8192 * 4), HM_SUCCESS);
  hm::test::MockControl mock;
  for (const Case& c : cases) {
    SCOPED_TRACE("m=" + std::to_string(c.m) + " k=" + std::to_string(c.k));
    hm_activation_quant_args_t args;
    hm_activation_quant_args_init(&args);
    args.m = c.m;
    args.k = c.k;
    args.group_k = c.group_k;
    args.a = buf;
    args.codes = buf + (4 << 20);
    args.scales = buf + (5 << 20);
    args.perm = c.perm ? d_perm : 0;
    mock.reset();
    ASSERT_EQ(hm_quantize_activation_device(ctx_, &args, nullptr), HM_SUCCESS) << last_error();
    const auto launch = mock.last_launch();
    ASSERT_TRUE(launch.has_value());
    EXPECT_EQ(launch->cluster[0], c.cluster);
    if (c.grid != 0) {
      EXPECT_EQ(launch->grid[0], c.grid);
      EXPECT_EQ(launch->block[0], c.block);
    }
    EXPECT_EQ(launch->executed, 1);
  }
  // An sm_80 device: never clusters.
  hm_context_t* ampere = context(1);
  ASSERT_NE(ampere, nullptr);
  uint64_t other = 0;
  ASSERT_EQ(hm_device_alloc(ampere, 4 << 20, &other), HM_SUCCESS);
  hm_activation_quant_args_t args;
  hm_activation_quant_args_init(&args);
  args.m = 3;
  args.k = 8192;
  args.a = other;
  args.codes = other + (2 << 20);
  args.scales = other + (3 << 20);
  mock.reset();
  ASSERT_EQ(hm_quantize_activation_device(ampere, &args, nullptr), HM_SUCCESS) << last_error();
  const auto launch = mock.last_launch();
  ASSERT_TRUE(launch.has_value());
  EXPECT_EQ(launch->cluster[0], 1u);
  EXPECT_EQ(launch->grid[0], 3u);
  hm_device_free(ampere, other);
  hm_context_destroy(ampere);
  hm_device_free(ctx_, buf);
}

TEST_F(QuantizeActivationDeviceApi, ContextWithoutDeviceIsRefusedAfterTheArgumentChecks) {
  hm_context_t* aot = context(HM_NO_DEVICE, "sm_80");
  ASSERT_NE(aot, nullptr);
  hm_activation_quant_args_t args;
  hm_activation_quant_args_init(&args);
  args.m = 1;
  args.k = 64;
  args.a = 0x100000;
  args.codes = 0x200000;
  args.scales = 0x300000;
  EXPECT_QUANT_FAILS(hm_quantize_activation_device(aot, &args, nullptr), HM_ERROR_NO_DEVICE,
                     "no device");
  args.scales = 0x300002;
  EXPECT_EQ(hm_quantize_activation_device(aot, &args, nullptr), HM_ERROR_MISALIGNED);
  hm_context_destroy(aot);
}

// A buffer whose allocation is shorter than the call's [m][k] / [m][groups] is refused before
// the launch, naming it; where the driver gives no allocation range, the launch reaches the
// (mock) device, which reports the illegal address a GPU would.
TEST_F(QuantizeActivationDeviceApi, OutOfBoundsBuffersAreRefusedOrFailLikeTheDevice) {
  uint64_t a = 0, small = 0, scales = 0;
  ASSERT_EQ(hm_device_alloc(ctx_, 4 * 512 * 2, &a), HM_SUCCESS);
  ASSERT_EQ(hm_device_alloc(ctx_, 100, &small), HM_SUCCESS);
  ASSERT_EQ(hm_device_alloc(ctx_, 64, &scales), HM_SUCCESS);
  hm_activation_quant_args_t args;
  hm_activation_quant_args_init(&args);
  args.m = 4;
  args.k = 512;
  args.a = a;
  args.codes = small;
  args.scales = scales;
  hm::test::MockControl mock;
  mock.reset();
  EXPECT_EQ(hm_quantize_activation_device(ctx_, &args, nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("args->codes (0x"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("uses 2048 bytes"), std::string::npos) << last_error();
  EXPECT_FALSE(mock.last_launch().has_value()) << "a refused call must not launch";
  args.codes = a;  // 4096 bytes: enough for the codes; now the scales, 4 x 64 groups x 4 bytes
  args.group_k = 8;
  EXPECT_EQ(hm_quantize_activation_device(ctx_, &args, nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("args->scales (0x"), std::string::npos) << last_error();
  args.codes = small;
  args.group_k = 0;
  hm::test::ScopedEnv no_range("HM_MOCK_NO_POINTER_RANGE", "1");
  EXPECT_NE(hm_quantize_activation_device(ctx_, &args, nullptr), HM_SUCCESS);
  hm_device_free(ctx_, scales);
  hm_device_free(ctx_, small);
  hm_device_free(ctx_, a);
}

// Whole quantizations against the host: both input dtypes, every output dtype, per token and
// per group, ragged K, a permutation with an out-of-range entry, zeros, NaN and infinity.
TEST_F(QuantizeActivationDeviceApi, MatchesTheHostQuantizerBitForBit) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (hm_dtype_t in : {HM_DTYPE_F16, HM_DTYPE_BF16}) {
    for (hm_dtype_t out : {HM_DTYPE_E4M3, HM_DTYPE_E5M2, HM_DTYPE_INT8}) {
      for (int32_t group_k : {0, 16, 128}) {
        for (bool permuted : {false, true}) {
          SCOPED_TRACE("in=" + std::to_string(in) + " out=" + std::to_string(out) +
                       " group_k=" + std::to_string(group_k) + " perm=" + std::to_string(permuted));
          const int64_t m = 5, k = 203;  // ragged: not a multiple of 8 or of the group
          std::vector<uint16_t> bits(m * k);
          std::vector<float> widened(m * k);
          for (int64_t i = 0; i < m * k; ++i) {
            float v = normal(rng) * (i / k == 3 ? 1e-30f : 1.0f);  // row 3: tiny values
            if (i / k == 1) v = 0.0f;                               // row 1: zeros
            if (i == 2 * k + 5) v = nan;
            if (i == 4 * k + 190) v = -inf;
            if (in == HM_DTYPE_BF16) {
              bits[i] = to_bf16(v);
              widened[i] = from_bf16(bits[i]);
            } else {
              bits[i] = to_f16(v, &widened[i]);
            }
          }
          std::vector<int32_t> perm(k);
          for (int64_t j = 0; j < k; ++j) perm[j] = static_cast<int32_t>((j * 37 + 11) % k);
          if (permuted) perm[150] = static_cast<int32_t>(k);  // out of range: its group is NaN
          // The host reference on the permuted, widened input.
          std::vector<float> host_in(m * k);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < k; ++j)
              host_in[i * k + j] =
                  !permuted ? widened[i * k + j]
                  : perm[j] >= k ? nan
                                 : widened[i * k + perm[j]];
          int64_t groups = 0;
          ASSERT_EQ(hm_activation_scale_groups(k, group_k, &groups), HM_SUCCESS);
          std::vector<uint8_t> want_codes(m * k);
          std::vector<float> want_scales(m * groups);
          ASSERT_EQ(hm_quantize_activation(out, host_in.data(), m, k, group_k, want_codes.data(),
                                           want_scales.data()),
                    HM_SUCCESS)
              << last_error();

          uint64_t d_a = 0, d_perm = 0, d_codes = 0, d_scales = 0;
          ASSERT_EQ(hm_device_alloc(ctx_, bits.size() * 2, &d_a), HM_SUCCESS);
          ASSERT_EQ(hm_device_alloc(ctx_, perm.size() * 4, &d_perm), HM_SUCCESS);
          ASSERT_EQ(hm_device_alloc(ctx_, m * k, &d_codes), HM_SUCCESS);
          ASSERT_EQ(hm_device_alloc(ctx_, m * groups * 4, &d_scales), HM_SUCCESS);
          ASSERT_EQ(hm_copy_to_device(ctx_, d_a, bits.data(), bits.size() * 2), HM_SUCCESS);
          ASSERT_EQ(hm_copy_to_device(ctx_, d_perm, perm.data(), perm.size() * 4), HM_SUCCESS);
          hm_activation_quant_args_t args;
          hm_activation_quant_args_init(&args);
          args.in_dtype = in;
          args.out_dtype = out;
          args.group_k = group_k;
          args.m = m;
          args.k = k;
          args.a = d_a;
          args.perm = permuted ? d_perm : 0;
          args.codes = d_codes;
          args.scales = d_scales;
          ASSERT_EQ(hm_quantize_activation_device(ctx_, &args, nullptr), HM_SUCCESS)
              << last_error();
          std::vector<uint8_t> codes(m * k);
          std::vector<uint32_t> scales(m * groups);
          ASSERT_EQ(hm_copy_to_host(ctx_, codes.data(), d_codes, codes.size()), HM_SUCCESS);
          ASSERT_EQ(hm_copy_to_host(ctx_, scales.data(), d_scales, scales.size() * 4), HM_SUCCESS);
          for (size_t i = 0; i < scales.size(); ++i) {
            uint32_t want;
            std::memcpy(&want, &want_scales[i], 4);
            ASSERT_EQ(scales[i], want) << "scale " << i / groups << "," << i % groups;
          }
          for (size_t i = 0; i < codes.size(); ++i)
            ASSERT_EQ(codes[i], want_codes[i]) << "code " << i / k << "," << i % k;
          for (uint64_t p : {d_a, d_perm, d_codes, d_scales}) hm_device_free(ctx_, p);
        }
      }
    }
  }
}

}  // namespace
