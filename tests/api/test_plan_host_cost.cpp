// The host cost of one hm_plan_gemm in driver calls (issue 15), counted per entry point by the
// mock driver; the pieces that keep it low (one context push per call, one pointer query per
// distinct pointer, the TMA maps kept while their inputs stay) and the fallbacks that keep the
// checks whole on drivers without the plural pointer query. benchmarks/NOTES.md has the numbers.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "api/context.hpp"
#include "api/device_check.hpp"
#include "api/support/mock_driver_test.hpp"
#include "core/error.hpp"
#include "humming.h"
#include "mock_driver/mock_loader.hpp"
#include "runtime/device.hpp"
#include "runtime/tensor_map.hpp"

namespace {

using namespace hm::test;  // the mock driver and the helpers of tests/api/support

constexpr const char* kFormat = "w=uint4b8 a=f16 c=f16 s=f16:g128 n=256 k=1024";
// The default tile of M = 1 on sm_90 (wg_bm8_w4_st8_b4_mb_tma_pw) copies A, the weight and the
// scale codes with TMA; this one, otherwise alike, copies with cp.async (no tensor maps).
constexpr const char* kPlainTile = R"({"dense": [{"kernel": "wgmma", "block_m": 8, "warps": 4,
                                      "stages": 8, "pipeline": "mbarrier"}]})";
constexpr const char* kTmaTile = nullptr;  // the default tiles
constexpr const char* kEncode = "cuTensorMapEncodeTiled";

// Driver calls of one hm_plan_gemm at M = 1 with five separate tensors (A, B, C, scales,
// workspace) and the default stream, on the mock (sm_90), once the kernel has run once.
// Before issue 15: 15 for the plain tile (2 context pushes and 2 pops, one pair for the pointer
// checks and one for the launch; 2 cuPointerGetAttribute per pointer; cuLaunchKernel), 24 for
// the TMA tile (3 maps, each a push, a cuTensorMapEncodeTiled and a pop, on every call).
// After: 8 for both (1 push, 1 pop, 1 cuPointerGetAttributes per pointer, cuLaunchKernel; the
// TMA maps encoded on the first call only). A test fails if a change adds one.
constexpr int64_t kCallsPerGemm = 8;

// A prepared plan on the mock's device 0 (a 9.0) and a call with M = 1 whose tensors are five
// separate allocations, as a model's layer has them.
class PlanHostCost : public MockDriverTest {
 protected:
  void SetUp() override {
    ctx_ = create_context(cache_, 0);
    ASSERT_NE(ctx_, nullptr);
    for (uint64_t* buffer : {&a_, &b_, &c_, &s_, &other_a_})
      ASSERT_EQ(hm_device_alloc(ctx_, 1 << 20, buffer), HM_SUCCESS) << last_error();
    ASSERT_EQ(hm_launch_params_create(&lp_), HM_SUCCESS);
  }
  void TearDown() override {
    hm_launch_params_destroy(lp_);
    hm_plan_destroy(plan_);
    for (uint64_t buffer : {a_, b_, c_, s_, other_a_, ws_}) hm_device_free(ctx_, buffer);
    hm_context_destroy(ctx_);
  }

  // Creates and prepares the plan (`tuning`: a tuning JSON, or null for the default tiles), sets
  // every argument of M = 1 (the workspace sized for M up to 64) and makes a first call, whose
  // driver calls first_ keeps (for a TMA tile it encodes the maps).
  void use(const char* tuning) {
    hm_format_t* f = nullptr;
    ASSERT_EQ(hm_format_parse(kFormat, &f), HM_SUCCESS) << last_error();
    hm_plan_options_t o;
    hm_plan_options_init(&o);
    o.tuning_json = tuning;
    hm_plan_destroy(plan_);
    plan_ = nullptr;
    ASSERT_EQ(hm_plan_create(ctx_, f, &o, &plan_), HM_SUCCESS) << last_error();
    hm_format_destroy(f);
    ASSERT_EQ(hm_plan_prepare(plan_), HM_SUCCESS) << last_error();
    uint64_t bytes = 0;
    ASSERT_EQ(hm_plan_workspace_size(plan_, 64, &bytes), HM_SUCCESS);
    if (bytes > 0 && ws_ == 0) {
      ASSERT_EQ(hm_device_alloc(ctx_, bytes, &ws_), HM_SUCCESS) << last_error();
    }
    hm_launch_params_set_pointer(lp_, HM_ARG_A, a_);
    hm_launch_params_set_pointer(lp_, HM_ARG_B, b_);
    hm_launch_params_set_pointer(lp_, HM_ARG_C, c_);
    hm_launch_params_set_pointer(lp_, HM_ARG_SCALES, s_);
    hm_launch_params_set_pointer(lp_, HM_ARG_WORKSPACE, ws_);
    hm_launch_params_set_int(lp_, HM_ARG_WORKSPACE_BYTES, static_cast<int64_t>(bytes));
    hm_launch_params_set_int(lp_, HM_ARG_M, 1);
    first_ = calls();
    first_encodes_ = of(kEncode);
    first_summary_ = summary();
  }
  std::string describe(int64_t m) {
    char text[512] = "";
    EXPECT_EQ(hm_plan_describe(plan_, m, text, sizeof text, nullptr), HM_SUCCESS);
    return text;
  }
  // The driver calls of one hm_plan_gemm, which must succeed; each entry point's count stays
  // readable with of() until the next call.
  int64_t calls(void* stream = nullptr) {
    mock_.reset();
    EXPECT_EQ(hm_plan_gemm(plan_, lp_, stream), HM_SUCCESS) << last_error();
    return mock_.driver_calls();
  }
  int64_t of(const char* entry_point) const { return mock_.driver_calls(entry_point); }
  std::string summary() const { return mock_.driver_call_summary(); }

  MockControl mock_;
  // One cache for every test here and every run (CTest runs each test in its own process).
  const std::string cache_ = HM_TEST_BINARY_DIR "/cache-plan-host-cost";
  hm_context_t* ctx_ = nullptr;
  hm_plan_t* plan_ = nullptr;
  hm_launch_params_t* lp_ = nullptr;
  uint64_t a_ = 0, b_ = 0, c_ = 0, s_ = 0, other_a_ = 0, ws_ = 0;
  int64_t first_ = 0, first_encodes_ = 0;
  std::string first_summary_;
};

TEST_F(PlanHostCost, APlainTileCallMakesOnePushOneQueryPerPointerAndTheLaunch) {
  ASSERT_NO_FATAL_FAILURE(use(kPlainTile));
  ASSERT_EQ(describe(1).find("_tma"), std::string::npos) << describe(1);
  EXPECT_EQ(calls(), kCallsPerGemm) << summary();
  EXPECT_EQ(of("cuCtxPushCurrent_v2"), 1) << summary();
  EXPECT_EQ(of("cuCtxPopCurrent_v2"), 1) << summary();
  EXPECT_EQ(of("cuPointerGetAttributes"), 5) << summary();
  EXPECT_EQ(of("cuPointerGetAttribute"), 0) << summary();
  // A wgmma kernel waits for the previous kernel itself, so it is launched programmatically:
  // through cuLaunchKernelEx (runtime/launch.hpp), still one driver call.
  EXPECT_EQ(of("cuLaunchKernelEx"), 1) << summary();
  EXPECT_EQ(of("cuLaunchKernel"), 0) << summary();
}

TEST_F(PlanHostCost, ATmaTileCallEncodesItsMapsOnceThenCostsWhatAPlainOneDoes) {
  ASSERT_NO_FATAL_FAILURE(use(kTmaTile));
  ASSERT_NE(describe(1).find("_tma"), std::string::npos) << describe(1);
  // The first call encodes A's, the weight's and the scale codes' maps, inside its one push.
  EXPECT_EQ(first_encodes_, 3);
  EXPECT_EQ(first_, kCallsPerGemm + 3) << first_summary_;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(calls(), kCallsPerGemm) << summary();
    EXPECT_EQ(of(kEncode), 0) << summary();
    EXPECT_EQ(of("cuCtxPushCurrent_v2"), 1) << summary();
  }
}

TEST_F(PlanHostCost, AStreamOtherThanTheDefaultOnesAddsOneQuery) {
  ASSERT_NO_FATAL_FAILURE(use(kPlainTile));
  void* stream = mock_.create_stream(0);
  EXPECT_EQ(calls(stream), kCallsPerGemm + 1) << summary();  // before: 18 (its own push and pop)
  EXPECT_EQ(of("cuStreamGetCtx"), 1) << summary();
  EXPECT_EQ(of("cuCtxPushCurrent_v2"), 1) << summary();
  mock_.destroy_stream(stream);
}

TEST_F(PlanHostCost, APointerInSeveralSlotsIsCheckedOnce) {
  ASSERT_NO_FATAL_FAILURE(use(kPlainTile));
  for (int32_t slot : {HM_ARG_B, HM_ARG_C, HM_ARG_SCALES})
    hm_launch_params_set_pointer(lp_, slot, a_);
  EXPECT_EQ(calls(), kCallsPerGemm - 3) << summary();
  EXPECT_EQ(of("cuPointerGetAttributes"), 2) << summary();  // a_ and the workspace
  // A refusal still names the first slot holding the bad value.
  hm_context_t* other = create_context(cache_, 1);
  ASSERT_NE(other, nullptr);
  uint64_t foreign = 0;
  ASSERT_EQ(hm_device_alloc(other, 1 << 16, &foreign), HM_SUCCESS) << last_error();
  for (int32_t slot : {HM_ARG_C, HM_ARG_SCALES}) hm_launch_params_set_pointer(lp_, slot, foreign);
  EXPECT_EQ(hm_plan_gemm(plan_, lp_, nullptr), HM_ERROR_WRONG_DEVICE);
  EXPECT_TRUE(contains(last_error(), "HM_ARG_C (0x")) << last_error();
  hm_device_free(other, foreign);
  hm_context_destroy(other);
}

// A driver whose plural query fails (a CUDA-compatible runtime may lack it) is asked attribute by
// attribute, as before: the call still passes, with its one push. Four attributes per pointer:
// device ordinal, memory type and the allocation's range (start and size, for the size check).
TEST_F(PlanHostCost, APluralQueryThatFailsFallsBackToSingleAttributes) {
  ASSERT_NO_FATAL_FAILURE(use(kPlainTile));
  ScopedEnv fail("HM_MOCK_FAIL_POINTER_GET_ATTRIBUTES", "1");
  EXPECT_EQ(calls(), kCallsPerGemm + 20) << summary();
  EXPECT_EQ(of("cuPointerGetAttributes"), 5) << summary();
  EXPECT_EQ(of("cuPointerGetAttribute"), 20) << summary();
  EXPECT_EQ(of("cuCtxPushCurrent_v2"), 1) << summary();
}

// A runtime whose plural query fails when asked for the range attributes: the first query is
// asked again without them, and from then on every call is back to one query per pointer
// (sizes unchecked). The driver remembers it for the process (CTest runs each test alone).
TEST_F(PlanHostCost, ARuntimeWithoutRangeAttributesPaysOneRetryOnce) {
  ScopedEnv no_ranges("HM_MOCK_PLURAL_WITHOUT_RANGES", "1");
  ASSERT_NO_FATAL_FAILURE(use(kPlainTile));
  EXPECT_NE(first_summary_.find("cuPointerGetAttributes"), std::string::npos) << first_summary_;
  EXPECT_EQ(calls(), kCallsPerGemm) << summary();
  EXPECT_EQ(of("cuPointerGetAttributes"), 5) << summary();
  EXPECT_EQ(of("cuPointerGetAttribute"), 0) << summary();
}

// The TMA maps of a call are kept while their inputs stay: a new A address or a new M re-encodes
// A's map (and only it); going back finds the earlier one.
TEST_F(PlanHostCost, ANewActivationAddressOrMReencodesOnlyTheActivationMap) {
  ASSERT_NO_FATAL_FAILURE(use(kTmaTile));
  EXPECT_EQ(first_encodes_, 3);
  hm_launch_params_set_pointer(lp_, HM_ARG_A, other_a_);
  EXPECT_EQ(calls(), kCallsPerGemm + 1) << summary();
  EXPECT_EQ(of(kEncode), 1);
  calls();
  EXPECT_EQ(of(kEncode), 0);
  hm_launch_params_set_int(lp_, HM_ARG_M, 2);
  calls();
  EXPECT_EQ(of(kEncode), 1);
  hm_launch_params_set_int(lp_, HM_ARG_M, 1);
  hm_launch_params_set_pointer(lp_, HM_ARG_A, a_);
  calls();
  EXPECT_EQ(of(kEncode), 0) << "A's first map is still kept";
  hm_launch_params_set_pointer(lp_, HM_ARG_B, b_ + 256);  // another weight: its map too
  calls();
  EXPECT_EQ(of(kEncode), 1);
}

// The cache belongs to the plan: a plan made after another is destroyed (maybe at the same
// address, with the same kernel) encodes its maps again.
TEST_F(PlanHostCost, ANewPlanStartsWithNoMaps) {
  ASSERT_NO_FATAL_FAILURE(use(kTmaTile));
  EXPECT_EQ(first_encodes_, 3);
  ASSERT_NO_FATAL_FAILURE(use(kTmaTile));
  EXPECT_EQ(first_encodes_, 3);
}

// Threads calling one plan share its maps: each thread's A map is encoded once, the others are
// the first call's.
TEST_F(PlanHostCost, ThreadsCallingOnePlanShareItsMaps) {
  ASSERT_NO_FATAL_FAILURE(use(kTmaTile));
  hm_launch_params_t* second = nullptr;
  ASSERT_EQ(hm_launch_params_create(&second), HM_SUCCESS);
  *second = *lp_;  // the same call with its own A and M
  hm_launch_params_set_pointer(second, HM_ARG_A, other_a_);
  hm_launch_params_set_int(second, HM_ARG_M, 2);
  mock_.reset();
  std::vector<int> failures(2, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i)
        failures[t] += hm_plan_gemm(plan_, t == 0 ? lp_ : second, nullptr) != HM_SUCCESS;
    });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures[0] + failures[1], 0);
  EXPECT_EQ(mock_.launch_count(), 400);
  EXPECT_EQ(of(kEncode), 1) << "only the second thread's A map is new";
  EXPECT_EQ(of("cuCtxPushCurrent_v2"), 400);
  hm_launch_params_destroy(second);
}

}  // namespace

namespace hm::runtime {
namespace {

using namespace hm::test;

// A device of the mock driver, and 2-D tensors in a buffer of it.
class TensorMapCacheTest : public testing::Test {
 protected:
  void SetUp() override { buffer_ = device_.alloc(1 << 20); }
  void TearDown() override { device_.free(buffer_); }
  TensorMap2d tensor(uint64_t offset = 0, uint64_t rows = 1) const {
    return TensorMap2d{reinterpret_cast<const void*>(buffer_ + offset), 2, rows, 1024, 2048, 64,
                       64, true};
  }
  int64_t encodes() const { return mock_.driver_calls("cuTensorMapEncodeTiled"); }
  // The map the driver encodes for `t` (the mock writes the address, the shape and the box into
  // the opaque words; equal maps for equal inputs).
  CUtensorMap fresh(const TensorMap2d& t) const {
    CUtensorMap map;
    encode_tensor_map(device_, t, &map, "test");
    return map;
  }
  static bool same(const CUtensorMap& a, const CUtensorMap& b) {
    return std::memcmp(&a, &b, sizeof a) == 0;
  }

  MockControl mock_;
  const std::shared_ptr<const Driver> driver_ = Driver::load(mock_driver_path());
  const Device device_{driver_, 0};
  uint64_t buffer_ = 0;
};

TEST_F(TensorMapCacheTest, KeepsAMapWhileEveryInputStays) {
  TensorMapCache cache;
  const TensorMap2d base = tensor();
  CUtensorMap map;
  mock_.reset();
  cache.encode(device_, base, &map, "A");
  EXPECT_EQ(encodes(), 1);
  EXPECT_TRUE(same(map, fresh(base)));
  mock_.reset();
  CUtensorMap again;
  cache.encode(device_, base, &again, "A");
  EXPECT_EQ(encodes(), 0);
  EXPECT_TRUE(same(again, map));
  // Each input is part of the key: changing any one gives that input's map.
  std::vector<TensorMap2d> changed(8, base);
  changed[0].base = reinterpret_cast<const void*>(buffer_ + 4096);
  changed[1].element_bytes = 1;
  changed[2].rows = 2;
  changed[3].cols = 512;
  changed[4].row_stride_bytes = 4096;
  changed[5].box_rows = 32;
  changed[6].box_cols = 32;
  changed[7].swizzle_128b = false;
  for (size_t i = 0; i < changed.size(); ++i) {
    mock_.reset();
    cache.encode(device_, changed[i], &map, "A");
    EXPECT_EQ(encodes(), 1) << "input " << i;
    EXPECT_TRUE(same(map, fresh(changed[i]))) << "input " << i;
  }
}

TEST_F(TensorMapCacheTest, FailuresAreNotKept) {
  TensorMapCache cache;
  TensorMap2d bad = tensor();
  bad.box_rows = 512;  // above TMA's 256: the driver refuses it
  CUtensorMap map;
  mock_.reset();
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(error_of([&] { cache.encode(device_, bad, &map, "HM_ARG_A"); }).status(),
              HM_ERROR_CUDA);
  EXPECT_EQ(encodes(), 2);
  bad = tensor(8);  // misaligned: refused before the driver, every time
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(error_of([&] { cache.encode(device_, bad, &map, "HM_ARG_A"); }).status(),
              HM_ERROR_INVALID_ARGUMENT);
}

TEST_F(TensorMapCacheTest, TheLeastRecentlyUsedMapMakesRoom) {
  TensorMapCache cache;
  CUtensorMap map;
  const int n = TensorMapCache::kCapacity;
  for (int i = 0; i < n; ++i) cache.encode(device_, tensor(0, 1 + i), &map, "A");
  cache.encode(device_, tensor(0, 1), &map, "A");      // the first is used again
  cache.encode(device_, tensor(0, 1 + n), &map, "A");  // one more evicts the second
  mock_.reset();
  cache.encode(device_, tensor(0, 1), &map, "A");
  EXPECT_EQ(encodes(), 0);
  cache.encode(device_, tensor(0, 2), &map, "A");
  EXPECT_EQ(encodes(), 1);
  EXPECT_TRUE(same(map, fresh(tensor(0, 2))));
}

TEST_F(TensorMapCacheTest, TheLauncherEncodesThroughTheCacheItIsGiven) {
  TensorMapCache cache;
  CUtensorMap map;
  mock_.reset();
  encode_tensor_map(device_, nullptr, tensor(), &map, "A");
  encode_tensor_map(device_, nullptr, tensor(), &map, "A");
  EXPECT_EQ(encodes(), 2) << "no cache: every call encodes";
  mock_.reset();
  encode_tensor_map(device_, &cache, tensor(), &map, "A");
  encode_tensor_map(device_, &cache, tensor(), &map, "A");
  EXPECT_EQ(encodes(), 1);
  encode_tensor_map(device_, nullptr, tensor(), &map, "A");
  EXPECT_EQ(encodes(), 2) << "a call without the cache does not read it";
  CUtensorMap cached;
  encode_tensor_map(device_, &cache, tensor(), &cached, "A");
  EXPECT_TRUE(same(cached, map)) << "the kept map is the one the driver encodes";
}

// Two threads share one cache with more inputs between them than it holds, so that entries are
// replaced while the other thread reads: every map must still be the one of its own inputs.
TEST_F(TensorMapCacheTest, ThreadsSharingACacheGetTheMapsOfTheirOwnInputs) {
  TensorMapCache cache;
  std::vector<CUtensorMap> expected;
  std::vector<TensorMap2d> inputs;
  for (int t = 0; t < 2; ++t)
    for (int i = 0; i < TensorMapCache::kCapacity; ++i) {
      inputs.push_back(tensor(4096 * t, 1 + i));
      expected.push_back(fresh(inputs.back()));
    }
  std::vector<int> wrong(2, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      const int n = TensorMapCache::kCapacity;
      for (int i = 0; i < 3000; ++i) {
        const int k = t * n + (i * (t + 1)) % n;
        CUtensorMap map;
        cache.encode(device_, inputs[k], &map, "A");
        wrong[t] += !same(map, expected[k]);
      }
    });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong[0] + wrong[1], 0);
}

// Scopes nest for free: a Scope inside a live Scope of the same context pushes nothing; one of
// another context pushes, and the outer one's context is current again after it.
TEST(RuntimeScope, NestedScopesOfOneContextPushOnce) {
  MockControl mock;
  const auto driver = Driver::load(mock_driver_path());
  const Device d0(driver, 0), d1(driver, 1);
  using GetCurrent = int (*)(CUcontext*);
  const auto get_current = reinterpret_cast<GetCurrent>(mock.symbol("cuCtxGetCurrent"));
  ASSERT_NE(get_current, nullptr);
  auto current = [&] {
    CUcontext c = nullptr;
    get_current(&c);
    return c;
  };
  mock.reset();
  {
    const Device::Scope outer(d0);
    {
      const Device::Scope same(d0);
      EXPECT_EQ(current(), d0.context());
    }
    EXPECT_EQ(current(), d0.context());
    {
      const Device::Scope other(d1);
      EXPECT_EQ(current(), d1.context());
      const Device::Scope back(d0);  // d1's is current: this one pushes
      EXPECT_EQ(current(), d0.context());
    }
    EXPECT_EQ(current(), d0.context());
    EXPECT_EQ(mock.driver_calls("cuCtxPushCurrent_v2"), 3);
  }
  EXPECT_EQ(mock.driver_calls("cuCtxPopCurrent_v2"), 3);
  EXPECT_EQ(current(), nullptr);
}

// The pointer checks give the same status and message whether the driver answers in one plural
// call, has it but fails it, or lacks it: the plural call only accepts this device's memory, and
// everything else takes the attribute-by-attribute path.
TEST(DeviceCheckQueries, SameAnswersWithAndWithoutThePluralQuery) {
  MockControl mock;
  const auto calls = mock.memory_calls();
  ASSERT_TRUE(calls.complete());

  std::shared_ptr<const Driver> without;
  {
    ScopedEnv hide("HM_MOCK_HIDE_SYMBOLS", "cuPointerGetAttributes");
    without = Driver::load(mock_driver_path());
  }
  const auto with = Driver::load(mock_driver_path());
  ASSERT_TRUE(with->has_pointer_get_attributes());
  ASSERT_FALSE(without->has_pointer_get_attributes());
  ASSERT_TRUE(without->has_pointer_get_attribute());

  const Device d0(with, 0), d1(with, 1), d0_without(without, 0);
  const uint64_t mine = d0.alloc(1 << 16), foreign = d1.alloc(1 << 16);
  std::vector<uint8_t> plain(1 << 16);
  const uint64_t unknown = (reinterpret_cast<uintptr_t>(plain.data()) + 255) / 256 * 256;
  void* host = std::aligned_alloc(256, 1 << 16);
  ASSERT_NE(host, nullptr);
  const uint64_t host_address = reinterpret_cast<uintptr_t>(host);
  uint64_t managed = 0;
  ASSERT_EQ(mock.in_context(1, [&] { return calls.alloc_managed(&managed, 1 << 16, 1); }), 0);

  // The answer for one pointer in HM_ARG_A: status and message.
  auto answer = [&](const Device& device, uint64_t pointer) -> std::pair<hm_status_t, std::string> {
    hm_launch_params params;
    params.pointers[HM_ARG_A] = pointer;
    try {
      hm::api::check_launch_device(device, params, nullptr);
      return {HM_SUCCESS, ""};
    } catch (const hm::Error& e) {
      return {e.status(), e.message()};
    }
  };
  auto compare = [&](const char* what, uint64_t pointer, hm_status_t expected) {
    const auto plural = answer(d0, pointer);
    EXPECT_EQ(plural.first, expected) << what << ": " << plural.second;
    {
      ScopedEnv fail("HM_MOCK_FAIL_POINTER_GET_ATTRIBUTES", "1");
      EXPECT_EQ(answer(d0, pointer), plural) << what << " (the plural query failing)";
    }
    EXPECT_EQ(answer(d0_without, pointer), plural) << what << " (no plural query)";
  };
  compare("device 0 memory", mine, HM_SUCCESS);
  compare("an interior pointer of it", mine + 4096, HM_SUCCESS);
  compare("device 1 memory", foreign, HM_ERROR_WRONG_DEVICE);
  compare("an interior pointer of device 1 memory", foreign + 4096, HM_ERROR_WRONG_DEVICE);
  compare("plain host memory", unknown, HM_ERROR_INVALID_ARGUMENT);
  compare("managed memory of device 1", managed, HM_SUCCESS);
  constexpr unsigned kPortable = 1, kDeviceMap = 2;
  ASSERT_EQ(mock.in_context(0, [&] { return calls.host_register(host, 1 << 16, kDeviceMap); }), 0);
  compare("host memory registered with device 0", host_address, HM_SUCCESS);
  ASSERT_EQ(calls.host_unregister(host), 0);
  ASSERT_EQ(mock.in_context(1, [&] { return calls.host_register(host, 1 << 16, kDeviceMap); }), 0);
  compare("host memory registered with device 1", host_address, HM_ERROR_WRONG_DEVICE);
  ASSERT_EQ(calls.host_unregister(host), 0);
  ASSERT_EQ(mock.in_context(1, [&] { return calls.host_register(host, 1 << 16, kPortable); }), 0);
  compare("portable host memory of device 1", host_address, HM_SUCCESS);
  ASSERT_EQ(calls.host_unregister(host), 0);
  {
    ScopedEnv pageable("HM_MOCK_PAGEABLE_MEMORY_ACCESS", "1");
    compare("plain host memory with pageable memory access", unknown, HM_SUCCESS);
  }

  // Device memory of this device costs one plural query, or two single ones without it.
  mock.reset();
  EXPECT_EQ(answer(d0, mine).first, HM_SUCCESS);
  EXPECT_EQ(mock.driver_calls("cuPointerGetAttributes"), 1);
  EXPECT_EQ(mock.driver_calls("cuPointerGetAttribute"), 0);
  mock.reset();
  EXPECT_EQ(answer(d0_without, mine).first, HM_SUCCESS);
  EXPECT_EQ(mock.driver_calls("cuPointerGetAttributes"), 0);
  EXPECT_EQ(mock.driver_calls("cuPointerGetAttribute"), 2);

  EXPECT_EQ(mock.in_context(1, [&] { return calls.mem_free(managed); }), 0);
  std::free(host);
  d0.free(mine);
  d1.free(foreign);
}

}  // namespace
}  // namespace hm::runtime
