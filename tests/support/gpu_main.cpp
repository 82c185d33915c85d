// GPU tests: with no usable GPU the whole executable exits with CTest's skip code (HM_TEST_SKIP_CODE), so a
// machine without a GPU reports these tests as skipped, never as passed.
#include <cstdio>

#include <gtest/gtest.h>

#include "humming.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  // Test discovery (--gtest_list_tests, consumed by InitGoogleTest) must work everywhere.
  if (testing::GTEST_FLAG(list_tests)) return RUN_ALL_TESTS();
  hm_runtime_info_t info;
  hm_runtime_info_init(&info);
  if (hm_runtime_info(&info) != HM_SUCCESS || info.device_count <= 0) {
    std::fprintf(stderr, "SKIP: no CUDA device (%s)\n",
                 info.driver_error[0] ? info.driver_error : "device count is 0");
    return HM_TEST_SKIP_CODE;
  }
  return RUN_ALL_TESTS();
}
