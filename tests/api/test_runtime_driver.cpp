// The driver loader against the mock driver: loading by path, the search order and its error,
// resolution through cuGetProcAddress and through versioned dlsym, missing required and optional
// entry points, cuInit failures, and the mapping of CUDA errors to hm statuses.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <string>

#include "api/support/mock_driver_test.hpp"
#include "core/error.hpp"
#include "mock_driver/mock_loader.hpp"
#include "runtime/driver.hpp"

namespace hm::runtime {
namespace {

using namespace hm::test;  // the mock driver and the helpers of tests/api/support

// Ends the process, with body's result as its exit code (2 when body throws).
[[noreturn]] void exit_with_result_of(const std::function<int()>& body) {
  int code = 2;
  try {
    code = body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "child threw: %s\n", e.what());
  }
  std::fflush(nullptr);
  _exit(code);
}

// Runs `body` in a new process and expects it to exit with body's result 0; the child describes
// failures on its stderr, which a failure here shows.
// Driver::shared() keeps the first driver it loads for the life of the process and the library
// has no way to forget it, so a test of that first load needs a process in which nothing has
// loaded it yet. A forked child is not one: it inherits the cache of this process, where every
// C-API test that made a context on a device has filled it with the mock. The "threadsafe"
// death-test style starts the child by executing this test binary again, running only this test
// up to the EXPECT_EXIT, so the cache starts empty whatever ran before in this process.
void expect_success_in_a_new_process(const std::function<int()>& body) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // for this test only: gtest restores flags
  EXPECT_EXIT(exit_with_result_of(body), testing::ExitedWithCode(0), "");
}

#define CHILD_EXPECT(condition)                                                    \
  do {                                                                             \
    if (!(condition)) {                                                            \
      std::fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #condition); \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

TEST(RuntimeDriver, LoadsTheMockByPath) {
  MockControl mock;
  mock.reset();
  const auto driver = Driver::load(mock_driver_path());
  EXPECT_EQ(driver->path(), mock_driver_path());
  EXPECT_EQ(driver->version(), 13000);
  EXPECT_EQ(driver->device_count(), 2);
  EXPECT_TRUE(driver->has_get_proc_address());
  EXPECT_GT(mock.proc_address_calls(), 20) << "entry points should come from cuGetProcAddress";
  EXPECT_TRUE(driver->has_launch_kernel_ex());
  EXPECT_TRUE(driver->has_pointer_get_attribute());
  EXPECT_TRUE(driver->has_stream_get_ctx());
  EXPECT_TRUE(driver->has_tensor_map_encode_tiled());
}

TEST(RuntimeDriver, DeviceCountFollowsTheDriver) {
  {
    ScopedEnv devices("HM_MOCK_DEVICES", "90,80,75");
    EXPECT_EQ(Driver::load(mock_driver_path())->device_count(), 3);
  }
  ScopedEnv none("HM_MOCK_DEVICES", "");
  // cuInit says CUDA_ERROR_NO_DEVICE: the driver still loads, with no device.
  EXPECT_EQ(Driver::load(mock_driver_path())->device_count(), 0);
}

TEST(RuntimeDriver, MissingFileIsNotFoundWithThePathAndDlerror) {
  const std::string path = "/nonexistent/humming/libcuda.so.1";
  const Error e = error_of([&] { Driver::load(path); });
  EXPECT_EQ(e.status(), HM_ERROR_DRIVER_NOT_FOUND);
  EXPECT_TRUE(contains(e.message(), "tried '" + path + "': ")) << e.message();
  EXPECT_TRUE(contains(e.message(), "No such file")) << e.message();
}

TEST(RuntimeDriver, NonLibraryFileIsNotFoundWithTheLoadersReason) {
  const std::string path = testing::TempDir() + "humming_not_a_library.so";
  std::ofstream(path) << "this is not an ELF file\n";
  dlerror();
  ASSERT_EQ(dlopen(path.c_str(), RTLD_NOW), nullptr);
  const std::string reason = dlerror();  // what the dynamic loader says about this file
  const Error e = error_of([&] { Driver::load(path); });
  EXPECT_EQ(e.status(), HM_ERROR_DRIVER_NOT_FOUND);
  EXPECT_TRUE(contains(e.message(), path)) << e.message();
  EXPECT_TRUE(contains(e.message(), reason)) << e.message() << "\nexpected: " << reason;
  std::remove(path.c_str());
}

TEST(RuntimeDriver, CandidatePathsHonourTheEnvironment) {
  {
    ScopedEnv path("HUMMING_CUDA_DRIVER_PATH", "/opt/vendor/libcuda.so");
    EXPECT_EQ(Driver::candidate_paths(), std::vector<std::string>{"/opt/vendor/libcuda.so"});
  }
  {
    ScopedEnv empty("HUMMING_CUDA_DRIVER_PATH", "");
    EXPECT_EQ(Driver::candidate_paths(), (std::vector<std::string>{"libcuda.so.1", "libcuda.so"}));
  }
  ScopedEnv unset("HUMMING_CUDA_DRIVER_PATH", nullptr);
  EXPECT_EQ(Driver::candidate_paths(), (std::vector<std::string>{"libcuda.so.1", "libcuda.so"}));
}

TEST(RuntimeDriver, SharedLoadsOnlyTheConfiguredPathAndCachesSuccess) {
  expect_success_in_a_new_process([] {
    setenv("HUMMING_CUDA_DRIVER_PATH", "/nonexistent/libcuda.so.1", 1);
    try {
      Driver::shared();
      CHILD_EXPECT(false && "a missing configured driver must fail");
    } catch (const Error& e) {
      CHILD_EXPECT(e.status() == HM_ERROR_DRIVER_NOT_FOUND);
      CHILD_EXPECT(contains(e.message(),
                            "tried '/nonexistent/libcuda.so.1' (from "
                            "HUMMING_CUDA_DRIVER_PATH): "));
      CHILD_EXPECT(!contains(e.message(), "; 'libcuda.so"));  // only the configured path
    }
    // A failure is not cached: the next call with a good path succeeds, and then sticks.
    setenv("HUMMING_CUDA_DRIVER_PATH", mock_driver_path().c_str(), 1);
    const auto first = Driver::shared();
    CHILD_EXPECT(first->path() == mock_driver_path());
    setenv("HUMMING_CUDA_DRIVER_PATH", "/nonexistent/libcuda.so.1", 1);
    CHILD_EXPECT(Driver::shared() == first);
    return 0;
  });
}

TEST(RuntimeDriver, SharedTriesEveryDefaultNameAndListsThemAll) {
  expect_success_in_a_new_process([] {
    unsetenv("HUMMING_CUDA_DRIVER_PATH");
    try {
      Driver::shared();  // a machine with a driver: nothing more to check here
    } catch (const Error& e) {
      if (e.status() != HM_ERROR_DRIVER_NOT_FOUND) return 0;  // found, but it failed to start
      CHILD_EXPECT(contains(e.message(), "tried 'libcuda.so.1': "));
      CHILD_EXPECT(contains(e.message(), "; 'libcuda.so': "));
      CHILD_EXPECT(contains(e.message(), "HUMMING_CUDA_DRIVER_PATH"));
    }
    return 0;
  });
}

TEST(RuntimeDriver, MissingRequiredEntryPointsAreNamed) {
  const std::string path = mock_driver_path("_no_launch");
  const Error e = error_of([&] { Driver::load(path); });
  EXPECT_EQ(e.status(), HM_ERROR_DRIVER_SYMBOL);
  EXPECT_TRUE(contains(e.message(), path)) << e.message();
  EXPECT_TRUE(contains(e.message(), "cuLaunchKernel")) << e.message();
  EXPECT_TRUE(contains(e.message(), "cuMemAlloc_v2")) << e.message();
  EXPECT_FALSE(contains(e.message(), "cuMemFree")) << "only the missing ones: " << e.message();
}

TEST(RuntimeDriver, WithoutGetProcAddressVersionedNamesAreUsed) {
  const auto driver = Driver::load(mock_driver_path("_minimal"));
  EXPECT_FALSE(driver->has_get_proc_address());
  EXPECT_EQ(driver->device_count(), 2);
  // Required ones resolved by their versioned names (the minimal mock exports only those) ...
  EXPECT_NE(driver->api().cuMemAlloc, nullptr);
  EXPECT_NE(driver->api().cuCtxPushCurrent, nullptr);
  EXPECT_NE(driver->api().cuDevicePrimaryCtxRelease, nullptr);
  // ... and the optional ones it lacks are missing capabilities, not errors.
  EXPECT_FALSE(driver->has_launch_kernel_ex());
  EXPECT_FALSE(driver->has_pointer_get_attribute());
  EXPECT_FALSE(driver->has_stream_get_ctx());
  EXPECT_FALSE(driver->has_tensor_map_encode_tiled());
}

TEST(RuntimeDriver, HiddenOptionalEntryPointIsAMissingCapability) {
  EXPECT_TRUE(Driver::load(mock_driver_path())->has_launch_kernel_ex());
  ScopedEnv hide("HM_MOCK_HIDE_SYMBOLS", "cuLaunchKernelEx");
  const auto driver = Driver::load(mock_driver_path());
  EXPECT_FALSE(driver->has_launch_kernel_ex());
  EXPECT_TRUE(driver->has_stream_get_ctx());
}

TEST(RuntimeDriver, RequiredEntryPointHiddenFromGetProcAddressFallsBackToDlsym) {
  ScopedEnv hide("HM_MOCK_HIDE_SYMBOLS", "cuMemAlloc,cuLaunchKernel");
  const auto driver = Driver::load(mock_driver_path());
  EXPECT_TRUE(driver->has_get_proc_address());
  EXPECT_EQ(reinterpret_cast<void*>(driver->api().cuMemAlloc),
            MockControl().symbol("cuMemAlloc_v2"));
  EXPECT_EQ(reinterpret_cast<void*>(driver->api().cuLaunchKernel),
            MockControl().symbol("cuLaunchKernel"));
}

TEST(RuntimeDriver, InitFailureNamesTheCudaError) {
  ScopedEnv fail("HM_MOCK_FAIL_INIT", "1");
  const Error e = error_of([] { Driver::load(mock_driver_path()); });
  EXPECT_EQ(e.status(), HM_ERROR_CUDA);
  EXPECT_TRUE(contains(e.message(), "cuInit failed: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"))
      << e.message();
  EXPECT_TRUE(contains(e.message(), mock_driver_path())) << e.message();
}

TEST(RuntimeDriver, StubLibraryIsExplainedEvenWhenTheDriverCannotNameTheError) {
  // The mock's cuGetErrorName does not know 34 (it answers NULL): our own table names it.
  ScopedEnv fail("HM_MOCK_FAIL_INIT", "34");
  const Error e = error_of([] { Driver::load(mock_driver_path()); });
  EXPECT_EQ(e.status(), HM_ERROR_CUDA);
  EXPECT_TRUE(contains(e.message(), "CUDA_ERROR_STUB_LIBRARY")) << e.message();
  EXPECT_TRUE(contains(e.message(), "stub library, not the driver")) << e.message();
}

TEST(RuntimeDriver, ToolkitStubLibraryIsRejected) {
  const std::string stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (!std::ifstream(stub)) GTEST_SKIP() << "no CUDA toolkit stub at " << stub;
  const Error e = error_of([&] { Driver::load(stub); });
  EXPECT_NE(e.status(), HM_SUCCESS);
  EXPECT_TRUE(contains(e.message(), "stub")) << e.message();
}

TEST(RuntimeDriver, ErrorNamesAreNullSafe) {
  const auto driver = Driver::load(mock_driver_path());
  EXPECT_EQ(driver->error_name(CUDA_ERROR_OUT_OF_MEMORY), "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(driver->error_string(CUDA_ERROR_OUT_OF_MEMORY), "out of memory");
  EXPECT_EQ(driver->error_name(12345), "CUDA error 12345");
  EXPECT_EQ(driver->error_string(12345), "no description");
}

TEST(RuntimeDriver, CheckThrowsWithCallNameErrorNameAndStatus) {
  const auto driver = Driver::load(mock_driver_path());
  EXPECT_NO_THROW(driver->check(CUDA_SUCCESS, "cuAnything"));
  Error e = error_of([&] { driver->check(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc", "8 bytes"); });
  EXPECT_EQ(e.status(), HM_ERROR_DEVICE_OUT_OF_MEMORY);
  EXPECT_EQ(e.message(), "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory): 8 bytes");
  e = error_of([&] { driver->check(CUDA_ERROR_ILLEGAL_ADDRESS, "cuStreamSynchronize"); });
  EXPECT_EQ(e.status(), HM_ERROR_LAUNCH);
  EXPECT_TRUE(contains(e.message(), "context is now unusable")) << e.message();
}

TEST(RuntimeDriver, CudaErrorsMapToStatuses) {
  EXPECT_EQ(status_for_cuda_error(CUDA_ERROR_OUT_OF_MEMORY), HM_ERROR_DEVICE_OUT_OF_MEMORY);
  EXPECT_EQ(status_for_cuda_error(CUDA_ERROR_LAUNCH_FAILED), HM_ERROR_LAUNCH);
  EXPECT_EQ(status_for_cuda_error(CUDA_ERROR_ILLEGAL_ADDRESS), HM_ERROR_LAUNCH);
  EXPECT_EQ(status_for_cuda_error(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES), HM_ERROR_LAUNCH);
  EXPECT_EQ(status_for_cuda_error(CUDA_ERROR_MISALIGNED_ADDRESS), HM_ERROR_LAUNCH);
  EXPECT_EQ(status_for_cuda_error(CUDA_ERROR_NO_DEVICE), HM_ERROR_NO_DEVICE);
  EXPECT_EQ(status_for_cuda_error(CUDA_ERROR_INVALID_DEVICE), HM_ERROR_NO_DEVICE);
  EXPECT_EQ(status_for_cuda_error(CUDA_ERROR_INVALID_VALUE), HM_ERROR_CUDA);
  EXPECT_EQ(status_for_cuda_error(CUDA_ERROR_INVALID_PTX), HM_ERROR_CUDA);
}

}  // namespace
}  // namespace hm::runtime
