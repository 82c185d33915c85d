// The CUDA driver for GPU tests that need it beyond the C API (streams, graph capture, contexts,
// managed and registered memory): the loader the tools and benchmarks use
// (tools/gpu_timing/gpu_driver.hpp), loaded once per process, and gtest checks of driver calls
// that name the call and the driver's error.
// Header-only; include from tests/gpu/*.cpp.
#pragma once

#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "gpu_driver.hpp"

namespace hm::gpu_test {

// The driver, loaded on first use (from any thread) and kept for the process; null when it could
// not be loaded, with the reason in *why. A test asserts cuda_driver_loaded() before using it.
inline const gpu_driver::Driver* cuda_driver(std::string* why = nullptr) {
  struct Loaded {
    std::optional<gpu_driver::Driver> driver;
    std::string error;
  };
  static const Loaded loaded = [] {
    Loaded l;
    try {
      l.driver = gpu_driver::load_driver();
    } catch (const gpu_driver::Error& e) {
      l.error = e.what();
    }
    return l;
  }();
  if (why) *why = loaded.error;
  return loaded.driver ? &*loaded.driver : nullptr;
}

// ASSERT_TRUE(cuda_driver_loaded()) fails with the reason the driver could not be loaded. A
// failure, not a skip: gpu_main.cpp has already skipped machines without a device.
inline testing::AssertionResult cuda_driver_loaded() {
  std::string why;
  if (cuda_driver(&why) != nullptr) return testing::AssertionSuccess();
  return testing::AssertionFailure() << why;
}

// The predicate formatter behind EXPECT_CU and ASSERT_CU (gtest's EXPECT_PRED_FORMAT3): the
// message is the call as written with the driver's name for the error, not the macro expansion.
inline testing::AssertionResult cu_call_succeeded(const char*, const char*, const char*,
                                                  const gpu_driver::Driver& cu, const char* call,
                                                  gpu_driver::CUresult result) {
  if (result == gpu_driver::CUDA_SUCCESS) return testing::AssertionSuccess();
  return testing::AssertionFailure() << cu.failure(result, call);
}

}  // namespace hm::gpu_test

// EXPECT_CU(cu, cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING)) << "more context" calls the member
// of the gpu_driver::Driver `cu` and fails the test with "cuStreamCreate(&stream,
// CU_STREAM_NON_BLOCKING) failed: CUDA_ERROR_X (text)" unless it returns CUDA_SUCCESS. ASSERT_CU
// also returns from the test.
#define EXPECT_CU(cu, call) \
  EXPECT_PRED_FORMAT3(::hm::gpu_test::cu_call_succeeded, (cu), #call, (cu).call)
#define ASSERT_CU(cu, call) \
  ASSERT_PRED_FORMAT3(::hm::gpu_test::cu_call_succeeded, (cu), #call, (cu).call)
