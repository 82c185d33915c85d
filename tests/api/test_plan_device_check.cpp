// hm_plan_gemm's per-call checks that need the driver (src/api/device_check.cpp) and the shape and
// alignment checks test_plan_api.cpp does not cover, on the mock driver: memory and streams of
// another device or context, host memory, managed and registered memory, missing entry points.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/context.hpp"
#include "api/device_check.hpp"
#include "api/support/mock_driver_test.hpp"
#include "core/error.hpp"
#include "humming.h"
#include "mock_driver/mock_loader.hpp"
#include "runtime/device.hpp"

namespace {

using namespace hm::test;  // the mock driver and the helpers of tests/api/support

// A prepared plan on device 0 with every slot its format uses set to valid device-0 memory, and
// a workspace: each test then breaks one argument and expects the call to name it.
class PlanDeviceCheck : public MockDriverTest {
 protected:
  void SetUp() override {
    ctx_ = create_context(cache_, 0);
    ASSERT_NE(ctx_, nullptr);
    ASSERT_EQ(hm_device_alloc(ctx_, 4 << 20, &buf_), HM_SUCCESS) << last_error();
    ASSERT_EQ(hm_launch_params_create(&lp_), HM_SUCCESS);
  }
  void TearDown() override {
    hm_launch_params_destroy(lp_);
    hm_plan_destroy(plan_);
    hm_device_free(ctx_, ws_);
    hm_device_free(ctx_, buf_);
    hm_context_destroy(ctx_);
  }

  // Creates and prepares the plan, then sets A, B, C and what `format` needs, the workspace for
  // M = max_m (or 64), and M = 1 (a split-K M for these shapes).
  void use(const char* format, int64_t max_m = 0) {
    hm_format_t* f = nullptr;
    ASSERT_EQ(hm_format_parse(format, &f), HM_SUCCESS) << last_error();
    hm_plan_options_t o;
    hm_plan_options_init(&o);
    o.max_m = max_m;
    ASSERT_EQ(hm_plan_create(ctx_, f, &o, &plan_), HM_SUCCESS) << format << ": " << last_error();
    hm_format_destroy(f);
    ASSERT_EQ(hm_plan_prepare(plan_), HM_SUCCESS) << last_error();
    ASSERT_EQ(hm_plan_workspace_size(plan_, max_m ? max_m : 64, &ws_bytes_), HM_SUCCESS);
    ASSERT_GT(ws_bytes_, 0u);
    ASSERT_EQ(hm_device_alloc(ctx_, ws_bytes_, &ws_), HM_SUCCESS) << last_error();
    const std::string text = format;
    hm_launch_params_set_pointer(lp_, HM_ARG_A, buf_);
    hm_launch_params_set_pointer(lp_, HM_ARG_B, buf_);
    hm_launch_params_set_pointer(lp_, HM_ARG_C, buf_);
    hm_launch_params_set_pointer(lp_, HM_ARG_SCALES, buf_);
    if (contains(text, "zp=")) hm_launch_params_set_pointer(lp_, HM_ARG_ZEROS, buf_);
    if (contains(text, "+tensor")) hm_launch_params_set_pointer(lp_, HM_ARG_GLOBAL, buf_);
    if (contains(text, "bias=1")) hm_launch_params_set_pointer(lp_, HM_ARG_BIAS, buf_);
    hm_launch_params_set_pointer(lp_, HM_ARG_WORKSPACE, ws_);
    hm_launch_params_set_int(lp_, HM_ARG_WORKSPACE_BYTES, static_cast<int64_t>(ws_bytes_));
    hm_launch_params_set_int(lp_, HM_ARG_M, 1);
    ASSERT_EQ(gemm(), HM_SUCCESS) << "the baseline call must pass: " << last_error();
  }
  hm_status_t gemm(void* stream = nullptr) { return hm_plan_gemm(plan_, lp_, stream); }
  // The workspace bytes a call with M = m uses, as hm_plan_describe says ("... workspace N
  // bytes"); -1 when it does not say.
  int64_t described_workspace(int64_t m) {
    char desc[512] = "";
    EXPECT_EQ(hm_plan_describe(plan_, m, desc, sizeof desc, nullptr), HM_SUCCESS);
    const std::string d = desc;
    const size_t at = d.find("workspace ");
    EXPECT_NE(at, std::string::npos) << d;
    return at == std::string::npos ? -1 : std::stoll(d.substr(at + 10));
  }
  // Sets `slot` to `pointer`, runs, restores the slot; returns the status.
  hm_status_t gemm_with(int32_t slot, uint64_t pointer) {
    const uint64_t keep = slot == HM_ARG_WORKSPACE ? ws_ : buf_;
    hm_launch_params_set_pointer(lp_, slot, pointer);
    const hm_status_t status = gemm();
    hm_launch_params_set_pointer(lp_, slot, keep);
    return status;
  }

  MockControl mock_;
  // One cache for every test here and every run (CTest runs each test in its own process): the
  // checks need compiled plans, not fresh compiles, and NVRTC takes seconds per format.
  const std::string cache_ = HM_TEST_BINARY_DIR "/cache-plan-device-check";
  hm_context_t* ctx_ = nullptr;
  hm_plan_t* plan_ = nullptr;
  hm_launch_params_t* lp_ = nullptr;
  uint64_t buf_ = 0, ws_ = 0, ws_bytes_ = 0;
};

struct Slot {
  int32_t slot;
  const char* name;
};

TEST_F(PlanDeviceCheck, MemoryOfAnotherDeviceIsWrongDeviceAndNamesTheSlot) {
  hm_context_t* other = create_context(cache_, 1);
  ASSERT_NE(other, nullptr);
  uint64_t foreign = 0;
  ASSERT_EQ(hm_device_alloc(other, 1 << 20, &foreign), HM_SUCCESS) << last_error();
  // Three formats between them use every pointer slot.
  const std::pair<const char*, std::vector<Slot>> cases[] = {
      {"w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=1024",
       {{HM_ARG_A, "HM_ARG_A"},
        {HM_ARG_B, "HM_ARG_B"},
        {HM_ARG_C, "HM_ARG_C"},
        {HM_ARG_SCALES, "HM_ARG_SCALES"},
        {HM_ARG_WORKSPACE, "HM_ARG_WORKSPACE"}}},
      {"w=uint4 a=f16 c=f16 s=f16:g128 zp=uint4 bias=1 n=256 k=1024",
       {{HM_ARG_ZEROS, "HM_ARG_ZEROS"}, {HM_ARG_BIAS, "HM_ARG_BIAS"}}},
      {"w=e2m1 a=f16 c=f16 s=e4m3:g16+tensor n=256 k=1024", {{HM_ARG_GLOBAL, "HM_ARG_GLOBAL"}}},
  };
  for (const auto& [format, slots] : cases) {
    hm_plan_destroy(plan_);
    plan_ = nullptr;
    hm_device_free(ctx_, ws_);
    ws_ = 0;
    hm_launch_params_clear(lp_);
    ASSERT_NO_FATAL_FAILURE(use(format));
    mock_.reset();
    for (const Slot& s : slots) {
      EXPECT_EQ(gemm_with(s.slot, foreign), HM_ERROR_WRONG_DEVICE) << format << " " << s.name;
      const std::string e = last_error();
      EXPECT_TRUE(contains(e, std::string(s.name) + " (0x")) << e;
      EXPECT_TRUE(contains(e, "memory of device 1")) << e;
      // An interior pointer of the same allocation is just as foreign.
      EXPECT_EQ(gemm_with(s.slot, foreign + 4096), HM_ERROR_WRONG_DEVICE) << s.name;
    }
    EXPECT_EQ(mock_.launch_count(), 0) << "a rejected call must not launch";
    EXPECT_EQ(gemm(), HM_SUCCESS) << format << ": " << last_error();
  }
  hm_device_free(other, foreign);
  hm_context_destroy(other);
}

TEST_F(PlanDeviceCheck, StreamOfAnotherContextIsWrongDevice) {
  ASSERT_NO_FATAL_FAILURE(use("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=1024"));
  hm_context_t* other = create_context(cache_, 1);
  ASSERT_NE(other, nullptr);
  void* ours = mock_.create_stream(0);
  void* of_device_1 = mock_.create_stream(1);
  void* of_own_context = mock_.create_stream(0, /*own_context=*/true);
  mock_.reset();

  EXPECT_EQ(gemm(of_device_1), HM_ERROR_WRONG_DEVICE);
  EXPECT_TRUE(contains(last_error(), "stream")) << last_error();
  EXPECT_TRUE(contains(last_error(), "another CUDA context")) << last_error();
  // Same device, but not the primary context the plan's kernels live in.
  EXPECT_EQ(gemm(of_own_context), HM_ERROR_WRONG_DEVICE) << last_error();
  EXPECT_EQ(mock_.launch_count(), 0);

  EXPECT_EQ(gemm(ours), HM_SUCCESS) << last_error();
  for (uintptr_t default_stream : {0, 1, 2})  // 0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD
    EXPECT_EQ(gemm(reinterpret_cast<void*>(default_stream)), HM_SUCCESS) << last_error();
  EXPECT_EQ(mock_.launch_count(), 4);
  auto launch = mock_.last_launch();
  ASSERT_TRUE(launch.has_value());
  EXPECT_EQ(launch->stream, reinterpret_cast<void*>(2));

  mock_.destroy_stream(ours);
  mock_.destroy_stream(of_device_1);
  mock_.destroy_stream(of_own_context);
  hm_context_destroy(other);
}

TEST_F(PlanDeviceCheck, HostMemoryTheDeviceCannotReachIsAnInvalidArgument) {
  ASSERT_NO_FATAL_FAILURE(use("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=1024"));
  std::vector<uint8_t> host(1 << 16);
  const uint64_t address = (reinterpret_cast<uintptr_t>(host.data()) + 255) / 256 * 256;
  for (const Slot& s : {Slot{HM_ARG_A, "HM_ARG_A"}, Slot{HM_ARG_C, "HM_ARG_C"}}) {
    EXPECT_EQ(gemm_with(s.slot, address), HM_ERROR_INVALID_ARGUMENT) << s.name;
    EXPECT_TRUE(contains(last_error(), std::string(s.name) + " (0x")) << last_error();
    EXPECT_TRUE(contains(last_error(), "does not know the address")) << last_error();
  }
  // A device that reads pageable memory (HMM, ATS) can use it.
  ScopedEnv pageable("HM_MOCK_PAGEABLE_MEMORY_ACCESS", "1");
  EXPECT_EQ(gemm_with(HM_ARG_A, address), HM_SUCCESS) << last_error();
}

TEST_F(PlanDeviceCheck, ManagedAndMappedHostMemoryAreAccepted) {
  ASSERT_NO_FATAL_FAILURE(use("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=1024"));
  hm_context_t* other = create_context(cache_, 1);
  ASSERT_NE(other, nullptr);
  const auto calls = mock_.memory_calls();
  ASSERT_TRUE(calls.complete());

  // Managed memory, allocated with either device's context current: usable from device 0.
  for (int device : {0, 1}) {
    uint64_t managed = 0;
    ASSERT_EQ(mock_.in_context(device, [&] { return calls.alloc_managed(&managed, 1 << 16, 1); }), 0);
    EXPECT_EQ(gemm_with(HM_ARG_A, managed), HM_SUCCESS) << "device " << device << last_error();
    EXPECT_EQ(mock_.in_context(device, [&] { return calls.mem_free(managed); }), 0);
  }

  constexpr unsigned kPortable = 1, kDeviceMap = 2;
  void* host = std::aligned_alloc(256, 1 << 16);
  ASSERT_NE(host, nullptr);
  const uint64_t address = reinterpret_cast<uintptr_t>(host);
  // Registered with device 0: mapped for it.
  ASSERT_EQ(mock_.in_context(0, [&] { return calls.host_register(host, 1 << 16, kDeviceMap); }), 0);
  EXPECT_EQ(gemm_with(HM_ARG_A, address), HM_SUCCESS) << last_error();
  ASSERT_EQ(calls.host_unregister(host), 0);
  // Registered with device 1 only: not mapped for device 0, and it belongs to device 1.
  ASSERT_EQ(mock_.in_context(1, [&] { return calls.host_register(host, 1 << 16, kDeviceMap); }), 0);
  EXPECT_EQ(gemm_with(HM_ARG_A, address), HM_ERROR_WRONG_DEVICE);
  EXPECT_TRUE(contains(last_error(), "HM_ARG_A")) << last_error();
  EXPECT_TRUE(contains(last_error(), "CU_MEMHOSTREGISTER_PORTABLE")) << last_error();
  ASSERT_EQ(calls.host_unregister(host), 0);
  // Registered with device 1 as portable: mapped for every context.
  ASSERT_EQ(mock_.in_context(1, [&] { return calls.host_register(host, 1 << 16, kPortable); }), 0);
  EXPECT_EQ(gemm_with(HM_ARG_A, address), HM_SUCCESS) << last_error();
  ASSERT_EQ(calls.host_unregister(host), 0);
  std::free(host);
  hm_context_destroy(other);
}

TEST_F(PlanDeviceCheck, ShapeAlignmentAndWorkspaceChecks) {
  // test_plan_api.cpp covers M = 0, a misaligned A and a missing workspace; these are the rest.
  ASSERT_NO_FATAL_FAILURE(use("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=1024", /*max_m=*/64));
  hm_launch_params_set_int(lp_, HM_ARG_M, -3);
  EXPECT_EQ(gemm(), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "HM_ARG_M must be in [1, HM_MAX_M = 2147483647], got -3")) << last_error();
  hm_launch_params_set_int(lp_, HM_ARG_M, 65);
  EXPECT_EQ(gemm(), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "max_m 64")) << last_error();
  hm_launch_params_set_int(lp_, HM_ARG_M, 64);
  EXPECT_EQ(gemm(), HM_SUCCESS) << last_error();
  hm_launch_params_set_int(lp_, HM_ARG_M, 1);

  // N and K come from the plan: the plan's values (or 0) pass, others are refused, named.
  hm_launch_params_set_int(lp_, HM_ARG_N, 256);
  hm_launch_params_set_int(lp_, HM_ARG_K, 1024);
  EXPECT_EQ(gemm(), HM_SUCCESS) << last_error();
  hm_launch_params_set_int(lp_, HM_ARG_N, 512);
  EXPECT_EQ(gemm(), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "HM_ARG_N is 512 but the plan's format has n = 256"))
      << last_error();
  hm_launch_params_set_int(lp_, HM_ARG_N, 0);
  hm_launch_params_set_int(lp_, HM_ARG_K, 1000);
  EXPECT_EQ(gemm(), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "HM_ARG_K is 1000 but the plan's format has k = 1024"))
      << last_error();
  hm_launch_params_set_int(lp_, HM_ARG_K, 0);

  EXPECT_EQ(gemm_with(HM_ARG_B, buf_ + 8), HM_ERROR_MISALIGNED);
  EXPECT_TRUE(contains(last_error(), "HM_ARG_B must be 16-byte aligned")) << last_error();
  EXPECT_EQ(gemm_with(HM_ARG_WORKSPACE, ws_ + 4), HM_ERROR_MISALIGNED);
  EXPECT_TRUE(contains(last_error(), "HM_ARG_WORKSPACE must be 16-byte aligned")) << last_error();

  // One byte short of what M = 1 needs.
  const int64_t need = described_workspace(1);
  ASSERT_GT(need, 0);
  hm_launch_params_set_int(lp_, HM_ARG_WORKSPACE_BYTES, need - 1);
  EXPECT_EQ(gemm(), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "workspace of " + std::to_string(need) + " bytes"))
      << last_error();
  hm_launch_params_set_int(lp_, HM_ARG_WORKSPACE_BYTES, need);
  EXPECT_EQ(gemm(), HM_SUCCESS) << last_error();
}

// Each buffer must hold what the call uses from its address (humming.h's sizes): an allocation
// of exactly that size passes, the same address with 16 bytes fewer before its allocation's end
// is refused naming the slot, M counts, and a driver without the range attributes skips the check.
TEST_F(PlanDeviceCheck, BuffersTooSmallForTheCallAreRefused) {
  const char* format = "w=uint4b8 a=f16 c=f16 s=f16:g128 bias=1 n=256 k=1024";
  ASSERT_NO_FATAL_FAILURE(use(format, /*max_m=*/64));
  hm_format_t* f = nullptr;
  ASSERT_EQ(hm_format_parse(format, &f), HM_SUCCESS);
  hm_packed_sizes_t sizes;
  hm_packed_sizes_init(&sizes);
  ASSERT_EQ(hm_format_packed_sizes(f, &sizes), HM_SUCCESS);
  hm_format_destroy(f);
  const int64_t m = 5, n = 256, k = 1024;
  hm_launch_params_set_int(lp_, HM_ARG_M, m);
  const std::pair<Slot, uint64_t> cases[] = {
      {{HM_ARG_A, "HM_ARG_A"}, uint64_t(m * k * 2)},
      {{HM_ARG_B, "HM_ARG_B"}, sizes.weight},
      {{HM_ARG_C, "HM_ARG_C"}, uint64_t(m * n * 2)},
      {{HM_ARG_SCALES, "HM_ARG_SCALES"}, sizes.scales},
      {{HM_ARG_BIAS, "HM_ARG_BIAS"}, uint64_t(n * 2)},
  };
  for (const auto& [s, bytes] : cases) {
    uint64_t exact = 0;
    ASSERT_EQ(hm_device_alloc(ctx_, bytes, &exact), HM_SUCCESS) << last_error();
    EXPECT_EQ(gemm_with(s.slot, exact), HM_SUCCESS) << s.name << ": " << last_error();
    mock_.reset();
    EXPECT_EQ(gemm_with(s.slot, exact + 16), HM_ERROR_INVALID_ARGUMENT) << s.name;
    const std::string e = last_error();
    EXPECT_TRUE(contains(e, std::string(s.name) + " (0x")) << e;
    EXPECT_TRUE(contains(e, std::to_string(bytes - 16) + " bytes from the end of its allocation"))
        << e;
    EXPECT_TRUE(contains(e, "uses " + std::to_string(bytes) + " bytes")) << e;
    EXPECT_EQ(mock_.launch_count(), 0) << "a refused call must not launch";
    {
      // A runtime without the range attributes cannot say: the call goes through unchecked.
      ScopedEnv no_range("HM_MOCK_NO_POINTER_RANGE", "1");
      EXPECT_EQ(gemm_with(s.slot, exact + 16), HM_SUCCESS) << s.name << ": " << last_error();
    }
    hm_device_free(ctx_, exact);
  }
  // The size follows M: C for M = 5 is too small for M = 6.
  uint64_t c = 0;
  ASSERT_EQ(hm_device_alloc(ctx_, uint64_t(m * n * 2), &c), HM_SUCCESS);
  hm_launch_params_set_int(lp_, HM_ARG_M, m + 1);
  EXPECT_EQ(gemm_with(HM_ARG_C, c), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "uses " + std::to_string((m + 1) * n * 2) + " bytes"))
      << last_error();
  hm_device_free(ctx_, c);
  // The workspace: what this M uses, not what HM_ARG_WORKSPACE_BYTES claims.
  hm_launch_params_set_int(lp_, HM_ARG_M, 1);
  const uint64_t need = static_cast<uint64_t>(described_workspace(1));
  ASSERT_GT(need, 0u);
  uint64_t ws = 0;
  ASSERT_EQ(hm_device_alloc(ctx_, need, &ws), HM_SUCCESS);
  EXPECT_EQ(gemm_with(HM_ARG_WORKSPACE, ws), HM_SUCCESS) << last_error();
  EXPECT_EQ(gemm_with(HM_ARG_WORKSPACE, ws + 16), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "HM_ARG_WORKSPACE")) << last_error();
  // Misaligned and short at once: named misaligned (the more precise of the two), as for B.
  EXPECT_EQ(gemm_with(HM_ARG_WORKSPACE, ws + 8), HM_ERROR_MISALIGNED) << last_error();
  uint64_t b = 0;
  ASSERT_EQ(hm_device_alloc(ctx_, sizes.weight, &b), HM_SUCCESS);
  EXPECT_EQ(gemm_with(HM_ARG_B, b + 8), HM_ERROR_MISALIGNED) << last_error();
  hm_device_free(ctx_, b);
  hm_device_free(ctx_, ws);
  // One allocation in several slots is checked for the largest of their sizes.
  uint64_t shared = 0;
  ASSERT_EQ(hm_device_alloc(ctx_, uint64_t(n * 2), &shared), HM_SUCCESS);
  hm_launch_params_set_pointer(lp_, HM_ARG_BIAS, shared);
  EXPECT_EQ(gemm(), HM_SUCCESS) << last_error();
  // A in the bias's 512 bytes: A needs 1 x 1024 x 2 of them, named by A's slot (the first).
  EXPECT_EQ(gemm_with(HM_ARG_A, shared), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "uses 2048 bytes")) << last_error();
  EXPECT_TRUE(contains(last_error(), "HM_ARG_A (0x")) << last_error();
  hm_launch_params_set_pointer(lp_, HM_ARG_BIAS, buf_);
  hm_device_free(ctx_, shared);
}

TEST_F(PlanDeviceCheck, ManagedAndRegisteredMemoryIsSizeCheckedToo) {
  ASSERT_NO_FATAL_FAILURE(use("w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=1024"));
  const auto calls = mock_.memory_calls();
  ASSERT_TRUE(calls.complete());
  const size_t a_bytes = 1024 * 2;  // A at M = 1
  uint64_t managed = 0;
  ASSERT_EQ(mock_.in_context(0, [&] { return calls.alloc_managed(&managed, a_bytes, 1); }), 0);
  EXPECT_EQ(gemm_with(HM_ARG_A, managed), HM_SUCCESS) << last_error();
  EXPECT_EQ(gemm_with(HM_ARG_A, managed + 16), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "HM_ARG_A")) << last_error();
  EXPECT_EQ(mock_.in_context(0, [&] { return calls.mem_free(managed); }), 0);
  constexpr unsigned kDeviceMap = 2;
  void* host = std::aligned_alloc(256, 4096);
  ASSERT_NE(host, nullptr);
  ASSERT_EQ(mock_.in_context(0, [&] { return calls.host_register(host, a_bytes, kDeviceMap); }), 0);
  const uint64_t address = reinterpret_cast<uintptr_t>(host);
  EXPECT_EQ(gemm_with(HM_ARG_A, address), HM_SUCCESS) << last_error();
  EXPECT_EQ(gemm_with(HM_ARG_A, address + 16), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "bytes from the end of its allocation")) << last_error();
  ASSERT_EQ(calls.host_unregister(host), 0);
  std::free(host);
}

// A tile whose shared memory the device cannot give a block (a smaller GPU, a tuning JSON
// written for a larger one) is refused by hm_plan_prepare, naming the tile and both sizes, not
// at the first call; on a device that fits, prepare opts the kernels in, so calls do not.
TEST_F(PlanDeviceCheck, SharedMemoryBeyondTheDeviceIsRefusedAtPrepare) {
  const char* format = "w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=1024";
  hm_format_t* f = nullptr;
  ASSERT_EQ(hm_format_parse(format, &f), HM_SUCCESS);
  {
    ScopedEnv small("HM_MOCK_SMEM_OPTIN", "49152");
    hm_context_t* ctx = create_context(cache_, 0);
    ASSERT_NE(ctx, nullptr);
    hm_plan_t* plan = nullptr;
    ASSERT_EQ(hm_plan_create(ctx, f, nullptr, &plan), HM_SUCCESS) << last_error();
    EXPECT_EQ(hm_plan_prepare(plan), HM_ERROR_UNSUPPORTED);
    const std::string e = last_error();
    EXPECT_TRUE(contains(e, "bytes of shared memory per block")) << e;
    EXPECT_TRUE(contains(e, "allows 49152")) << e;
    EXPECT_TRUE(contains(e, "the tile ")) << e;
    hm_plan_destroy(plan);
    hm_context_destroy(ctx);
  }
  hm_plan_t* plan = nullptr;
  ASSERT_EQ(hm_plan_create(ctx_, f, nullptr, &plan), HM_SUCCESS) << last_error();
  mock_.reset();
  ASSERT_EQ(hm_plan_prepare(plan), HM_SUCCESS) << last_error();
  EXPECT_GT(mock_.driver_calls("cuFuncSetAttribute"), 0) << "prepare opts the kernels in";
  hm_plan_destroy(plan);
  hm_format_destroy(f);
}

// The check itself, on drivers with and without the optional entry points it relies on.
TEST(DeviceCheck, SkipsWhatTheDriverCannotAnswer) {
  using namespace hm::runtime;
  for (const char* variant : {"", "_minimal"}) {
    const auto driver = Driver::load(hm::test::mock_driver_path(variant));
    const Device d0(driver, 0), d1(driver, 1);
    const uint64_t mine = d0.alloc(256), foreign = d1.alloc(256);
    const CUstream foreign_stream = d1.create_stream();
    hm_launch_params params;
    params.pointers[HM_ARG_A] = mine;
    EXPECT_NO_THROW(hm::api::check_launch_device(d0, params, nullptr)) << variant;
    params.pointers[HM_ARG_B] = foreign;
    const bool full = variant[0] == '\0';
    auto status = [&](CUstream stream) -> hm_status_t {
      try {
        hm::api::check_launch_device(d0, params, stream);
        return HM_SUCCESS;
      } catch (const hm::Error& e) {
        return e.status();
      }
    };
    EXPECT_EQ(status(nullptr), full ? HM_ERROR_WRONG_DEVICE : HM_SUCCESS) << variant;
    params.pointers[HM_ARG_B] = mine;
    EXPECT_EQ(status(foreign_stream), full ? HM_ERROR_WRONG_DEVICE : HM_SUCCESS) << variant;
    d1.destroy_stream(foreign_stream);
    d0.free(mine);
    d1.free(foreign);
  }
}

}  // namespace
