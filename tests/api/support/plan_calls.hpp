// What the plan tests on the mock driver share: the arguments of one hm_plan_gemm call, the
// launch the mock recorded for it, and a fixture with a context and plans of formats by text.
#pragma once

#include <cstdint>
#include <optional>

#include <gtest/gtest.h>

#include "api/support/mock_driver_test.hpp"
#include "humming.h"
#include "mock_driver/mock_loader.hpp"

namespace hm::test {

// The arguments of one hm_plan_gemm call, freed at the end of the scope: one 1 MiB device buffer
// stands in for every tensor (the mock checks where pointers point, not what they hold), and a
// workspace once add_workspace() has made one.
class GemmArguments {
 public:
  explicit GemmArguments(hm_context_t* context) : context_(context) {
    EXPECT_EQ(hm_device_alloc(context_, 1 << 20, &buffer_), HM_SUCCESS) << last_error();
    EXPECT_EQ(hm_launch_params_create(&params_), HM_SUCCESS);
  }
  ~GemmArguments() {
    hm_device_free(context_, workspace_);
    hm_device_free(context_, buffer_);
    hm_launch_params_destroy(params_);
  }
  GemmArguments(const GemmArguments&) = delete;
  GemmArguments& operator=(const GemmArguments&) = delete;

  hm_launch_params_t* params() const { return params_; }
  uint64_t buffer() const { return buffer_; }
  uint64_t workspace_bytes() const { return workspace_bytes_; }

  // Allocates the workspace `plan` needs for M = m and sets both workspace slots; nothing when it
  // needs none.
  void add_workspace(hm_plan_t* plan, int64_t m) {
    ASSERT_EQ(hm_plan_workspace_size(plan, m, &workspace_bytes_), HM_SUCCESS) << last_error();
    if (workspace_bytes_ == 0) return;
    ASSERT_EQ(hm_device_alloc(context_, workspace_bytes_, &workspace_), HM_SUCCESS) << last_error();
    hm_launch_params_set_pointer(params_, HM_ARG_WORKSPACE, workspace_);
    hm_launch_params_set_int(params_, HM_ARG_WORKSPACE_BYTES,
                             static_cast<int64_t>(workspace_bytes_));
  }
  // Every argument of a call with M = m for a format whose only tensors are A, B, C and scales.
  void set_all(hm_plan_t* plan, int64_t m) {
    hm_launch_params_set_int(params_, HM_ARG_M, m);
    for (int32_t slot : {HM_ARG_A, HM_ARG_B, HM_ARG_C, HM_ARG_SCALES})
      hm_launch_params_set_pointer(params_, slot, buffer_);
    add_workspace(plan, m);
  }

 private:
  hm_context_t* context_;
  hm_launch_params_t* params_ = nullptr;
  uint64_t buffer_ = 0, workspace_ = 0, workspace_bytes_ = 0;
};

// Calls hm_plan_gemm, which must succeed, and returns the launch the mock recorded for it.
inline std::optional<hm_mock_launch_t> gemm_launch(hm_plan_t* plan, const GemmArguments& args) {
  MockControl mock;
  mock.reset();
  EXPECT_EQ(hm_plan_gemm(plan, args.params(), nullptr), HM_SUCCESS) << last_error();
  return mock.last_launch();
}

// A context on the mock driver with its own kernel cache, and plans of formats given as text
// (hm_plan_create must succeed).
class MockPlanTest : public MockDriverTest {
 protected:
  void SetUp() override {
    ctx_ = create_context(cache_.path());
    ASSERT_NE(ctx_, nullptr);
  }
  void TearDown() override { hm_context_destroy(ctx_); }
  hm_plan_t* plan(const char* text) {
    hm_format_t* f = nullptr;
    EXPECT_EQ(hm_format_parse(text, &f), HM_SUCCESS) << last_error();
    hm_plan_t* p = nullptr;
    EXPECT_EQ(hm_plan_create(ctx_, f, nullptr, &p), HM_SUCCESS) << last_error();
    hm_format_destroy(f);
    return p;
  }
  const TemporaryDirectory cache_{"humming-plan-test"};
  hm_context_t* ctx_ = nullptr;
};

}  // namespace hm::test
