// Devices on the mock driver: properties, the primary context and its scope, memory, streams,
// and the ownership queries behind HM_ERROR_WRONG_DEVICE.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "api/support/mock_driver_test.hpp"
#include "core/error.hpp"
#include "mock_driver/mock_loader.hpp"
#include "runtime/device.hpp"

namespace hm::runtime {
namespace {

using namespace hm::test;  // the mock driver and the helpers of tests/api/support

TEST(RuntimeDevice, ReadsTheDeviceProperties) {
  const auto driver = Driver::load(mock_driver_path());
  const Device hopper(driver, 0);
  const DeviceProperties& p = hopper.properties();
  EXPECT_EQ(p.ordinal, 0);
  EXPECT_EQ(p.name, "Humming Mock GPU");
  EXPECT_EQ(p.cc_major, 9);
  EXPECT_EQ(p.cc_minor, 0);
  EXPECT_EQ(p.arch, "sm_90a");
  EXPECT_EQ(p.multiprocessors, 132);
  EXPECT_EQ(p.max_threads_per_block, 1024);
  EXPECT_EQ(p.smem_per_block_optin, 232448);
  EXPECT_EQ(p.l2_bytes, 50 << 20);
  EXPECT_EQ(p.total_memory, int64_t{141} << 30);

  const Device ampere(driver, 1);
  EXPECT_EQ(ampere.properties().cc_major, 8);
  EXPECT_EQ(ampere.properties().cc_minor, 0);
  EXPECT_EQ(ampere.properties().arch, "sm_80");
  EXPECT_EQ(ampere.properties().smem_per_block_optin, 166912);
}

TEST(RuntimeDevice, ConfiguredDevicesGetTheirArch) {
  ScopedEnv devices("HM_MOCK_DEVICES", "75,86,89,100,120,121");
  const auto driver = Driver::load(mock_driver_path());
  const char* expected[] = {"sm_75", "sm_86", "sm_89", "sm_100a", "sm_120a", "sm_121a"};
  ASSERT_EQ(driver->device_count(), 6);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(Device(driver, i).properties().arch, expected[i]);
}

TEST(RuntimeDevice, OrdinalOutOfRangeNamesTheDeviceCount) {
  const auto driver = Driver::load(mock_driver_path());
  for (int ordinal : {2, -1}) {
    const Error e = error_of([&] { Device(driver, ordinal); });
    EXPECT_EQ(e.status(), HM_ERROR_NO_DEVICE);
    EXPECT_TRUE(contains(e.message(), "device ordinal " + std::to_string(ordinal)));
    EXPECT_TRUE(contains(e.message(), "reports 2 device(s)")) << e.message();
  }
  ScopedEnv none("HM_MOCK_DEVICES", "");
  const Error e = error_of([] { Device(Driver::load(mock_driver_path()), 0); });
  EXPECT_EQ(e.status(), HM_ERROR_NO_DEVICE);
  EXPECT_TRUE(contains(e.message(), "reports 0 devices")) << e.message();
}

TEST(RuntimeDevice, RetainsThePrimaryContextForItsLifetime) {
  MockControl mock;
  const auto driver = Driver::load(mock_driver_path());
  const int before = mock.primary_ctx_refcount(1);
  {
    const Device a(driver, 1);
    EXPECT_EQ(mock.primary_ctx_refcount(1), before + 1);
    const Device b(driver, 1);
    EXPECT_EQ(mock.primary_ctx_refcount(1), before + 2);
    EXPECT_EQ(a.context(), b.context()) << "both share the device's primary context";
  }
  EXPECT_EQ(mock.primary_ctx_refcount(1), before);
}

TEST(RuntimeDevice, ScopeMakesTheContextCurrentAndRestoresThePreviousOne) {
  MockControl mock;
  using GetCurrent = CUresult (*)(CUcontext*);
  const auto get_current = reinterpret_cast<GetCurrent>(mock.symbol("cuCtxGetCurrent"));
  ASSERT_NE(get_current, nullptr);
  auto current = [&] {
    CUcontext c = nullptr;
    EXPECT_EQ(get_current(&c), CUDA_SUCCESS);
    return c;
  };
  const auto driver = Driver::load(mock_driver_path());
  const Device d0(driver, 0), d1(driver, 1);
  ASSERT_NE(d0.context(), d1.context());
  const CUcontext outside = current();
  {
    Device::Scope s0(d0);
    EXPECT_EQ(current(), d0.context());
    {
      Device::Scope s1(d1);
      EXPECT_EQ(current(), d1.context());
    }
    EXPECT_EQ(current(), d0.context());
  }
  EXPECT_EQ(current(), outside);
}

TEST(RuntimeDevice, TheMockRefusesCallsWithoutACurrentContext) {
  // What makes the tests below meaningful: memory calls need the Scope that Device opens.
  const auto driver = Driver::load(mock_driver_path());
  const Device device(driver, 0);
  CUdeviceptr pointer = 0;
  EXPECT_EQ(driver->api().cuMemAlloc(&pointer, 64), CUDA_ERROR_INVALID_CONTEXT);
}

// A host-to-device copy waits for its DMA before it returns: from pageable memory cuMemcpyHtoD
// alone may return with the bytes only staged, ordered before later work on the legacy stream but
// not on a non-blocking one (an H100 saw a graph replayed on such a stream read stale routing ids,
// NOTES v36). The wait is a cuStreamSynchronize of the legacy stream after the copy.
TEST(RuntimeDevice, CopyToDeviceWaitsForItsDma) {
  MockControl mock;
  const auto driver = Driver::load(mock_driver_path());
  const Device d0(driver, 0);
  std::vector<uint8_t> in(256, 7);
  const uint64_t p = d0.alloc(in.size());
  const int64_t copies = mock.driver_calls("cuMemcpyHtoD_v2");
  const int64_t syncs = mock.driver_calls("cuStreamSynchronize");
  d0.copy_to_device(p, in.data(), in.size());
  EXPECT_EQ(mock.driver_calls("cuMemcpyHtoD_v2"), copies + 1);
  EXPECT_EQ(mock.driver_calls("cuStreamSynchronize"), syncs + 1);
  d0.copy_to_device(p, in.data(), 0);  // nothing to copy, nothing to wait for
  EXPECT_EQ(mock.driver_calls("cuStreamSynchronize"), syncs + 1);
  d0.free(p);
}

TEST(RuntimeDevice, MemoryRoundTripsAndKnowsItsDevice) {
  MockControl mock;
  const auto driver = Driver::load(mock_driver_path());
  const Device d0(driver, 0), d1(driver, 1);
  const int64_t live = mock.live_allocations();

  std::vector<uint8_t> in(1000), out(1000, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 37 + 11);
  const uint64_t p0 = d0.alloc(in.size());
  const uint64_t p1 = d1.alloc(16);
  EXPECT_EQ(mock.live_allocations(), live + 2);
  EXPECT_EQ(p0 % 256, 0u) << "cuMemAlloc alignment";
  d0.copy_to_device(p0, in.data(), in.size());
  d0.copy_to_host(out.data(), p0, out.size());
  EXPECT_EQ(in, out);

  d0.memset_async(p0 + 10, 0xAB, 20, nullptr);
  d0.synchronize(nullptr);
  d0.copy_to_host(out.data(), p0, out.size());
  for (size_t i = 0; i < out.size(); ++i)
    ASSERT_EQ(out[i], i >= 10 && i < 30 ? 0xAB : in[i]) << "byte " << i;

  EXPECT_EQ(d0.pointer_device(p0), 0);
  EXPECT_EQ(d0.pointer_device(p0 + 999), 0) << "an interior pointer";
  EXPECT_EQ(d0.pointer_device(p1), 1) << "memory of the other device";
  EXPECT_EQ(d0.pointer_device(reinterpret_cast<uint64_t>(in.data())), std::nullopt)
      << "host memory the driver does not know";

  d0.free(p0);
  d1.free(p1);
  d0.free(0);  // no-op
  EXPECT_EQ(mock.live_allocations(), live);
  const Error e = error_of([&] { d0.free(p0); });
  EXPECT_EQ(e.status(), HM_ERROR_CUDA);
  EXPECT_TRUE(contains(e.message(), "cuMemFree failed: CUDA_ERROR_INVALID_VALUE")) << e.message();
}

TEST(RuntimeDevice, ZeroBytesAreRejectedForAllocAndIgnoredForCopies) {
  const auto driver = Driver::load(mock_driver_path());
  const Device device(driver, 0);
  const Error e = error_of([&] { device.alloc(0); });
  EXPECT_EQ(e.status(), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NO_THROW(device.copy_to_device(0, nullptr, 0));
  EXPECT_NO_THROW(device.copy_to_host(nullptr, 0, 0));
}

TEST(RuntimeDevice, AllocationFailureIsDeviceOutOfMemory) {
  const auto driver = Driver::load(mock_driver_path());
  const Device device(driver, 0);
  ScopedEnv fail("HM_MOCK_FAIL_ALLOC", "1");
  const Error e = error_of([&] { device.alloc(1 << 20); });
  EXPECT_EQ(e.status(), HM_ERROR_DEVICE_OUT_OF_MEMORY);
  EXPECT_TRUE(contains(e.message(), "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY")) << e.message();
  EXPECT_TRUE(contains(e.message(), "1048576 bytes on device 0")) << e.message();
}

TEST(RuntimeDevice, CopyPastTheAllocationFails) {
  const auto driver = Driver::load(mock_driver_path());
  const Device device(driver, 0);
  const uint64_t p = device.alloc(64);
  std::vector<char> host(128);
  const Error e = error_of([&] { device.copy_to_device(p, host.data(), host.size()); });
  EXPECT_EQ(e.status(), HM_ERROR_CUDA);
  EXPECT_TRUE(contains(e.message(), "cuMemcpyHtoD failed: CUDA_ERROR_INVALID_VALUE"))
      << e.message();
  device.free(p);
}

TEST(RuntimeDevice, StreamsBelongToTheirDevice) {
  MockControl mock;
  mock.reset();
  const auto driver = Driver::load(mock_driver_path());
  const Device d0(driver, 0), d1(driver, 1);
  const int64_t live = mock.live_streams();
  const CUstream s0 = d0.create_stream(), s1 = d1.create_stream();
  EXPECT_EQ(mock.live_streams(), live + 2);
  EXPECT_EQ(d0.owns_stream(s0), true);
  EXPECT_EQ(d0.owns_stream(s1), false);
  EXPECT_EQ(d1.owns_stream(s1), true);
  EXPECT_EQ(d0.owns_stream(nullptr), true) << "the default stream is the current context's";
  EXPECT_EQ(mock.newer_abi_calls(), 0) << "cuStreamGetCtx must be resolved at its 9.2 ABI";

  const uint64_t p = d0.alloc(32);
  d0.memset_async(p, 7, 32, s0);
  d0.synchronize(s0);
  // A stream of another context is refused by the driver.
  const Error e = error_of([&] { d0.memset_async(p, 7, 32, s1); });
  EXPECT_EQ(e.status(), HM_ERROR_CUDA);
  d0.free(p);
  d0.destroy_stream(s0);
  d1.destroy_stream(s1);
  EXPECT_EQ(mock.live_streams(), live);
}

TEST(RuntimeDevice, OwnershipIsUnknownWithoutTheOptionalEntryPoints) {
  const auto driver = Driver::load(mock_driver_path("_minimal"));
  const Device device(driver, 0);
  const uint64_t p = device.alloc(16);
  const CUstream stream = device.create_stream();
  EXPECT_EQ(device.pointer_device(p), std::nullopt);
  EXPECT_EQ(device.owns_stream(stream), std::nullopt);
  device.destroy_stream(stream);
  device.free(p);
}

}  // namespace
}  // namespace hm::runtime
