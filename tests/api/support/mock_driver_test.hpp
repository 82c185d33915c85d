// What the tests in tests/api share: reading errors (the hm::Error the runtime throws, the last
// message of the C ABI), and the base fixture of the C-ABI tests that run on the mock CUDA driver,
// with temporary kernel caches and contexts made on them.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>  // mkdtemp

#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <system_error>

#include "core/error.hpp"
#include "humming.h"
#include "mock_driver/mock_loader.hpp"
#include "support/last_error.hpp"

namespace hm::test {

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The hm::Error that `body` throws; fails the test when it throws nothing.
inline Error error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected an hm::Error";
  return Error(HM_SUCCESS, "");
}

// A new directory /tmp/<prefix>-XXXXXX, removed with its contents at the end of the scope.
class TemporaryDirectory {
 public:
  explicit TemporaryDirectory(const std::string& prefix) {
    std::string pattern = "/tmp/" + prefix + "-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("cannot create a directory from " + pattern);
    path_ = pattern;
  }
  ~TemporaryDirectory() {
    std::error_code error;
    std::filesystem::remove_all(path_, error);
    EXPECT_FALSE(error) << "cannot remove " << path_ << ": " << error.message();
  }
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A context on `device` (HM_NO_DEVICE with a target_arch: one that only compiles) that keeps its
// kernels in `cache_dir`; nullptr, with a test failure, when hm_context_create refuses.
inline hm_context_t* create_context(const std::string& cache_dir, int device = 0,
                                    const char* target_arch = nullptr, uint32_t flags = 0) {
  hm_context_options_t o;
  hm_context_options_init(&o);
  o.device = device;
  o.target_arch = target_arch;
  o.cache_dir = cache_dir.c_str();
  o.flags = flags;
  hm_context_t* context = nullptr;
  EXPECT_EQ(hm_context_create(&o, &context), HM_SUCCESS) << last_error();
  return context;
}

// Base of the fixtures that drive the C ABI on the mock driver. During each test the driver the
// library loads is the mock and JIT compiles are allowed, whatever the environment or an earlier
// test in the same process set; both variables are restored after the test.
// Driver::shared() reads HUMMING_CUDA_DRIVER_PATH only until its first successful load and keeps
// that driver for the life of the process, so tests that share a process share the mock loaded
// first; that is harmless, as the mock reads its HM_MOCK_* switches at call time.
class MockDriverTest : public testing::Test {
 private:
  ScopedEnv driver_is_the_mock_{"HUMMING_CUDA_DRIVER_PATH", HM_MOCK_DRIVER_PATH};
  ScopedEnv jit_allowed_{"HUMMING_DISABLE_JIT", nullptr};
};

}  // namespace hm::test
