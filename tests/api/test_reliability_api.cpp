// The C ABI against hostile or careless callers (issue 16): launch slots outside the named ones,
// boolean environment variables read one way by every part of the library, and user text
// escaped in the messages of contexts and kernels.
#include <gtest/gtest.h>

#include <string>

#include "api/support/mock_driver_test.hpp"
#include "humming.h"

namespace {

using hm::test::last_error;
using hm::test::ScopedEnv;

TEST(LaunchSlots, OnlyNamedSlotsAreAccepted) {
  hm_launch_params_t* p = nullptr;
  ASSERT_EQ(hm_launch_params_create(&p), HM_SUCCESS);
  for (int32_t slot = HM_ARG_A; slot <= HM_ARG_MASKED_M; ++slot)
    EXPECT_EQ(hm_launch_params_set_pointer(p, slot, 0x1000), HM_SUCCESS) << slot;
  for (int32_t slot = HM_ARG_M; slot <= HM_ARG_MOE_MODE; ++slot)
    EXPECT_EQ(hm_launch_params_set_int(p, slot, 7), HM_SUCCESS) << slot;
  // The storage behind the named slots is larger; the slots between are no arguments at all.
  for (int32_t slot : {HM_ARG_MASKED_M + 1, 15, HM_ARG_M, 31, -1}) {
    EXPECT_EQ(hm_launch_params_set_pointer(p, slot, 0x1000), HM_ERROR_INVALID_ARGUMENT) << slot;
    EXPECT_NE(last_error().find(std::to_string(slot)), std::string::npos) << last_error();
  }
  for (int32_t slot : {HM_ARG_MOE_MODE + 1, 31, HM_ARG_A, 32}) {
    EXPECT_EQ(hm_launch_params_set_int(p, slot, 7), HM_ERROR_INVALID_ARGUMENT) << slot;
    EXPECT_NE(last_error().find(std::to_string(slot)), std::string::npos) << last_error();
  }
  hm_launch_params_destroy(p);
}

class ReliabilityApi : public hm::test::MockDriverTest {
 protected:
  const hm::test::TemporaryDirectory cache_{"humming-reliability-test"};
};

// HUMMING_DISABLE_JIT=false meant "off" to the cache and "on" to hm_context_create.
TEST_F(ReliabilityApi, DisableJitFalseMeansJitIsAllowed) {
  for (const char* off : {"false", "no", "off", "0", "FALSE"}) {
    ScopedEnv env("HUMMING_DISABLE_JIT", off);
    hm_context_t* ctx = hm::test::create_context(cache_.path(), HM_NO_DEVICE, "sm_80");
    ASSERT_NE(ctx, nullptr);
    hm_kernel_t* k = nullptr;
    EXPECT_EQ(hm_kernel_create_reference_gemm(ctx, HM_DTYPE_F16, HM_DTYPE_F16, &k), HM_SUCCESS)
        << off << ": " << last_error();
    hm_kernel_destroy(k);
    hm_context_destroy(ctx);
  }
}

TEST_F(ReliabilityApi, AnUnreadableBooleanIsAnError) {
  ScopedEnv env("HUMMING_DISABLE_JIT", "maybe");
  hm_context_options_t o;
  hm_context_options_init(&o);
  o.device = HM_NO_DEVICE;
  o.target_arch = "sm_80";
  o.cache_dir = cache_.path().c_str();
  hm_context_t* ctx = nullptr;
  EXPECT_EQ(hm_context_create(&o, &ctx), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_NE(last_error().find("HUMMING_DISABLE_JIT"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("'maybe'"), std::string::npos) << last_error();
}

TEST_F(ReliabilityApi, CacheDirectoriesAreQuotedInMessages) {
  const std::string dir = cache_.path() + "/x\x1b[2J\x07y";
  hm_context_t* ctx =
      hm::test::create_context(dir, HM_NO_DEVICE, "sm_80", HM_CONTEXT_DISABLE_JIT);
  ASSERT_NE(ctx, nullptr);
  hm_kernel_t* k = nullptr;
  EXPECT_EQ(hm_kernel_create_reference_gemm(ctx, HM_DTYPE_F16, HM_DTYPE_F16, &k),
            HM_ERROR_JIT_DISABLED);
  const std::string message = last_error();
  EXPECT_EQ(message.find('\x1b'), std::string::npos) << message;
  EXPECT_EQ(message.find('\x07'), std::string::npos) << message;
  EXPECT_NE(message.find("\\x1b"), std::string::npos) << message;
  hm_context_destroy(ctx);
}

}  // namespace
