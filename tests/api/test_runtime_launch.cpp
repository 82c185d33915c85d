// Modules and launches on the mock driver: image loading (PTX with JIT errors, binary ELF),
// kernel lookup, argument marshalling, the reference GEMM computed end to end through "device"
// memory, launch failures, shared memory opt-in, clusters, and one Device used by two threads.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/support/mock_driver_test.hpp"
#include "core/error.hpp"
#include "mock_driver/mock_loader.hpp"
#include "runtime/launch.hpp"
#include "runtime/module.hpp"

namespace hm::runtime {
namespace {

using namespace hm::test;  // the mock driver and the helpers of tests/api/support

constexpr const char* kGemmName = "hm_reference_gemm_f32_f32";

// PTX as NVRTC would declare the lead's kernel (the mock reads the parameter list).
constexpr const char* kGemmPtx = R"(
.version 8.0
.target sm_90a
.address_size 64

.visible .entry hm_reference_gemm_f32_f32(
	.param .u64 .ptr .global .align 4 hm_reference_gemm_f32_f32_param_0,
	.param .u64 .ptr .global .align 4 hm_reference_gemm_f32_f32_param_1,
	.param .u64 .ptr .global .align 4 hm_reference_gemm_f32_f32_param_2,
	.param .u64 hm_reference_gemm_f32_f32_param_3,
	.param .u64 hm_reference_gemm_f32_f32_param_4,
	.param .u64 hm_reference_gemm_f32_f32_param_5
)
{
	ret;
}
)";

// A GEMM of small integers: every product and sum is exact in f32, so results compare equal.
struct Gemm {
  int64_t m, n, k;
  std::vector<float> a, b, c;  // c: the expected result
};

Gemm make_gemm(int64_t m, int64_t n, int64_t k, int seed) {
  Gemm g{m, n, k, std::vector<float>(m * k), std::vector<float>(n * k), std::vector<float>(m * n)};
  for (int64_t i = 0; i < m * k; ++i) g.a[i] = static_cast<float>((i * 7 + seed) % 9 - 4);
  for (int64_t i = 0; i < n * k; ++i) g.b[i] = static_cast<float>((i * 5 + 3 * seed) % 7 - 3);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0;
      for (int64_t l = 0; l < k; ++l) sum += g.a[i * k + l] * g.b[j * k + l];
      g.c[i * n + j] = sum;
    }
  return g;
}

// Runs the GEMM through device memory and returns C as the kernel left it.
std::vector<float> run_gemm(const Device& device, CUfunction function, const Gemm& g,
                            CUstream stream = nullptr) {
  uint64_t a = device.alloc(g.a.size() * 4), b = device.alloc(g.b.size() * 4),
           c = device.alloc(g.c.size() * 4);
  device.copy_to_device(a, g.a.data(), g.a.size() * 4);
  device.copy_to_device(b, g.b.data(), g.b.size() * 4);
  device.memset_async(c, 0xFF, g.c.size() * 4, stream);  // NaNs: an unwritten C shows
  long long m = g.m, n = g.n, k = g.k;
  void* args[] = {&a, &b, &c, &m, &n, &k};
  launch(device, function,
         {static_cast<uint32_t>((g.n + 15) / 16), static_cast<uint32_t>((g.m + 15) / 16), 1},
         {16, 16, 1}, 0, stream, args, kGemmName);
  device.synchronize(stream);
  std::vector<float> result(g.c.size());
  device.copy_to_host(result.data(), c, result.size() * 4);
  device.free(a);
  device.free(b);
  device.free(c);
  return result;
}

TEST(RuntimeModule, LoadsAnImageAndFindsItsKernels) {
  MockControl mock;
  const auto driver = Driver::load(mock_driver_path());
  const Device device(driver, 0);
  const int64_t live = mock.live_modules();
  {
    const Module module(device, kGemmPtx);
    EXPECT_EQ(mock.live_modules(), live + 1);
    EXPECT_EQ(mock.last_image(), kGemmPtx);
    EXPECT_NE(module.function(kGemmName), nullptr);
    EXPECT_EQ(module.function(kGemmName), module.function(kGemmName));
    const Error e = error_of([&] { module.function("hm_reference_gemm"); });  // a prefix only
    EXPECT_EQ(e.status(), HM_ERROR_CUDA);
    EXPECT_TRUE(contains(e.message(), "cuModuleGetFunction failed: CUDA_ERROR_NOT_FOUND"))
        << e.message();
    EXPECT_TRUE(contains(e.message(), "no kernel named 'hm_reference_gemm'")) << e.message();
  }
  EXPECT_EQ(mock.live_modules(), live) << "the destructor unloads the module";
}

TEST(RuntimeModule, EmptyImageIsAnInvalidArgument) {
  const auto driver = Driver::load(mock_driver_path());
  const Device device(driver, 0);
  EXPECT_EQ(error_of([&] { Module(device, ""); }).status(), HM_ERROR_INVALID_ARGUMENT);
}

TEST(RuntimeModule, DriverJitErrorsCarryTheLog) {
  const auto driver = Driver::load(mock_driver_path());
  const Device device(driver, 0);
  const std::string ptx = ".version 8.0\nHM_MOCK_JIT_ERROR: unknown symbol 'foo' at line 2\n";
  const Error e = error_of([&] { Module(device, ptx); });
  EXPECT_EQ(e.status(), HM_ERROR_CUDA);
  EXPECT_TRUE(contains(e.message(), "cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX"))
      << e.message();
  EXPECT_TRUE(contains(e.message(), "on device 0 (sm_90a)")) << e.message();
  EXPECT_TRUE(contains(e.message(),
                       "driver JIT log:\nmock ptxas error: HM_MOCK_JIT_ERROR: "
                       "unknown symbol 'foo' at line 2"))
      << e.message();
}

// A minimal ELF64 file whose string table names the GEMM kernel: a binary image with NUL bytes
// throughout, which the driver sizes from its headers.
std::string fake_cubin() {
  const std::string strtab = std::string("\0", 1) + kGemmName + std::string("\0other\0", 7);
  const size_t shoff = (64 + strtab.size() + 7) / 8 * 8;
  std::string elf(shoff + 2 * 64, '\0');
  const unsigned char ident[] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  std::memcpy(&elf[0], ident, sizeof(ident));
  auto put = [&](size_t at, auto value) { std::memcpy(&elf[at], &value, sizeof(value)); };
  put(0x28, uint64_t{shoff});
  put(0x3A, uint16_t{64});
  put(0x3C, uint16_t{2});
  std::memcpy(&elf[64], strtab.data(), strtab.size());
  const size_t section = shoff + 64;  // section 1: the string table
  put(section + 4, uint32_t{3});
  put(section + 0x18, uint64_t{64});
  put(section + 0x20, uint64_t{strtab.size()});
  return elf;
}

TEST(RuntimeModule, BinaryImagesArePassedWhole) {
  MockControl mock;
  const auto driver = Driver::load(mock_driver_path());
  const Device device(driver, 0);
  const std::string cubin = fake_cubin();
  const Module module(device, cubin);
  EXPECT_EQ(mock.last_image(), cubin);
  EXPECT_NE(module.function(kGemmName), nullptr);
  // The mock knows this kernel's signature even without PTX, so it runs.
  const Gemm g = make_gemm(2, 3, 4, 1);
  EXPECT_EQ(run_gemm(device, module.function(kGemmName), g), g.c);
}

TEST(RuntimeLaunch, ReferenceGemmRunsEndToEnd) {
  MockControl mock;
  mock.reset();
  const auto driver = Driver::load(mock_driver_path());
  const Device device(driver, 0);
  const Module module(device, kGemmPtx);
  const CUfunction gemm = module.function(kGemmName);
  const int64_t live = mock.live_allocations();

  const Gemm g = make_gemm(5, 7, 9, 3);
  const std::vector<float> c = run_gemm(device, gemm, g);
  EXPECT_EQ(c, g.c);
  EXPECT_EQ(mock.live_allocations(), live);

  const auto last = mock.last_launch();
  ASSERT_TRUE(last.has_value());
  EXPECT_STREQ(last->function, kGemmName);
  EXPECT_EQ(last->grid[0], 1u);
  EXPECT_EQ(last->grid[1], 1u);
  EXPECT_EQ(last->block[0], 16u);
  EXPECT_EQ(last->block[1], 16u);
  EXPECT_EQ(last->shared_memory_bytes, 0u);
  EXPECT_EQ(last->stream, nullptr);
  EXPECT_EQ(last->param_count, 6);
  EXPECT_EQ(last->arg_bytes_size, 48u);
  EXPECT_EQ(last->executed, 1);
  int64_t mnk[3];
  std::memcpy(mnk, last->arg_bytes + 24, sizeof(mnk));
  EXPECT_EQ(mnk[0], 5);
  EXPECT_EQ(mnk[1], 7);
  EXPECT_EQ(mnk[2], 9);
  EXPECT_EQ(mock.launch_count(), 1);
}

TEST(RuntimeLaunch, ReferenceGemmRunsThroughVersionedDlsym) {
  const auto driver = Driver::load(mock_driver_path("_minimal"));
  ASSERT_FALSE(driver->has_get_proc_address());
  const Device device(driver, 1);
  const Module module(device, kGemmPtx);
  const CUfunction gemm = module.function(kGemmName);
  const CUstream stream = device.create_stream();
  const Gemm g = make_gemm(17, 3, 33, 5);
  EXPECT_EQ(run_gemm(device, gemm, g, stream), g.c);
  device.destroy_stream(stream);
}

TEST(RuntimeLaunch, ArgumentsAreMarshalledAtTheirParameterOffsets) {
  MockControl mock;
  const auto driver = Driver::load(mock_driver_path());
  const Device device(driver, 0);
  const Module module(device, R"(.visible .entry mixed(
      .param .u32 mixed_param_0, .param .u64 mixed_param_1,
      .param .align 8 .b8 mixed_param_2[12], .param .u8 mixed_param_3) { ret; })");
  uint32_t first = 0x11223344;
  uint64_t second = 0x0102030405060708ull;
  unsigned char third[12];
  for (int i = 0; i < 12; ++i) third[i] = static_cast<unsigned char>(0xA0 + i);
  uint8_t fourth = 0x5A;
  void* args[] = {&first, &second, third, &fourth};
  CUstream stream = device.create_stream();
  launch(device, module.function("mixed"), {3, 2, 1}, {128, 1, 1}, 1024, stream, args);
  const auto last = mock.last_launch();
  ASSERT_TRUE(last.has_value());
  EXPECT_STREQ(last->function, "mixed");
  EXPECT_EQ(last->stream, stream);
  EXPECT_EQ(last->shared_memory_bytes, 1024u);
  EXPECT_EQ(last->param_count, 4);
  ASSERT_EQ(last->arg_bytes_size, 29u);  // 0: u32, 8: u64, 16: b8[12], 28: u8
  EXPECT_EQ(std::memcmp(last->arg_bytes + 0, &first, 4), 0);
  EXPECT_EQ(std::memcmp(last->arg_bytes + 8, &second, 8), 0);
  EXPECT_EQ(std::memcmp(last->arg_bytes + 16, third, 12), 0);
  EXPECT_EQ(last->arg_bytes[28], fourth);
  EXPECT_EQ(last->executed, 0);
  device.destroy_stream(stream);
}

TEST(RuntimeLaunch, LaunchFailureIsHmErrorLaunch) {
  const auto driver = Driver::load(mock_driver_path());
  const Device device(driver, 0);
  const Module module(device, kGemmPtx);
  ScopedEnv fail("HM_MOCK_FAIL_LAUNCH", "1");
  const Error e =
      error_of([&] { run_gemm(device, module.function(kGemmName), make_gemm(2, 2, 2, 0)); });
  EXPECT_EQ(e.status(), HM_ERROR_LAUNCH);
  EXPECT_TRUE(contains(e.message(), "cuLaunchKernel failed: CUDA_ERROR_LAUNCH_FAILED"))
      << e.message();
  EXPECT_TRUE(contains(e.message(), kGemmName)) << e.message();
}

TEST(RuntimeLaunch, OutOfBoundsOperandIsAnIllegalAddress) {
  const auto driver = Driver::load(mock_driver_path());
  const Device device(driver, 0);
  const Module module(device, kGemmPtx);
  uint64_t small = device.alloc(16);
  long long m = 4, n = 4, k = 4;  // needs 64 bytes per operand
  void* args[] = {&small, &small, &small, &m, &n, &k};
  const Error e = error_of([&] {
    launch(device, module.function(kGemmName), {1, 1, 1}, {32, 1, 1}, 0, nullptr, args, kGemmName);
  });
  EXPECT_EQ(e.status(), HM_ERROR_LAUNCH);
  EXPECT_TRUE(contains(e.message(), "CUDA_ERROR_ILLEGAL_ADDRESS")) << e.message();
  device.free(small);
}

TEST(RuntimeLaunch, LargeSharedMemoryIsOptedInOncePerFunction) {
  MockControl mock;
  mock.reset();
  const auto driver = Driver::load(mock_driver_path());
  const Device device(driver, 0);  // 232448 bytes opt-in
  auto module = std::make_unique<Module>(device, kGemmPtx);
  uint64_t buffer = device.alloc(64);
  long long one = 1;
  void* args[] = {&buffer, &buffer, &buffer, &one, &one, &one};
  auto run = [&](uint32_t smem) {
    launch(device, module->function(kGemmName), {1, 1, 1}, {32, 1, 1}, smem, nullptr, args);
  };
  run(48 * 1024);  // the default limit: no attribute needed
  EXPECT_EQ(mock.func_attribute_sets(), 0);
  run(100 * 1024);  // the mock, like the driver, rejects this without the attribute
  EXPECT_EQ(mock.func_attribute_sets(), 1);
  run(100 * 1024);
  run(64 * 1024);
  EXPECT_EQ(mock.func_attribute_sets(), 1) << "once per function and size";
  run(200 * 1024);
  EXPECT_EQ(mock.func_attribute_sets(), 2);

  const Error e = error_of([&] { run(300 * 1024); });
  EXPECT_EQ(e.status(), HM_ERROR_LAUNCH);
  EXPECT_TRUE(contains(e.message(), "allows 232448")) << e.message();

  // A reloaded module's function starts over, even under the old handle (the mock reuses
  // handles of unloaded modules, as drivers may).
  const CUfunction old_handle = module->function(kGemmName);
  module.reset();
  module = std::make_unique<Module>(device, kGemmPtx);
  EXPECT_EQ(module->function(kGemmName), old_handle);
  EXPECT_NO_THROW(run(100 * 1024));
  EXPECT_EQ(mock.func_attribute_sets(), 3);
  device.free(buffer);
}

TEST(RuntimeLaunch, EmptyGridAndOversizedBlockAreRejected) {
  const auto driver = Driver::load(mock_driver_path());
  const Device device(driver, 0);
  const Module module(device, kGemmPtx);
  const CUfunction f = module.function(kGemmName);
  Error e = error_of([&] { launch(device, f, {0, 1, 1}, {32, 1, 1}, 0, nullptr, nullptr, "k"); });
  EXPECT_EQ(e.status(), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(e.message(), "kernel 'k': the grid (0, 1, 1) is empty")) << e.message();
  e = error_of([&] { launch(device, f, {1, 1, 1}, {64, 32, 1}, 0, nullptr, nullptr); });
  EXPECT_EQ(e.status(), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(e.message(), "2048 threads; the device allows 1 to 1024")) << e.message();
}

TEST(RuntimeLaunch, ClustersGoThroughLaunchKernelEx) {
  MockControl mock;
  const auto driver = Driver::load(mock_driver_path());
  const Device device(driver, 0);
  const Module module(device, kGemmPtx);
  const Gemm g = make_gemm(3, 4, 5, 2);
  uint64_t a = device.alloc(g.a.size() * 4), b = device.alloc(g.b.size() * 4),
           c = device.alloc(g.c.size() * 4);
  device.copy_to_device(a, g.a.data(), g.a.size() * 4);
  device.copy_to_device(b, g.b.data(), g.b.size() * 4);
  long long m = g.m, n = g.n, k = g.k;
  void* args[] = {&a, &b, &c, &m, &n, &k};
  launch_with_cluster(device, module.function(kGemmName), {4, 2, 1}, {128, 1, 1}, {2, 1, 1},
                      100 * 1024, nullptr, args, kGemmName);
  const auto last = mock.last_launch();
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->cluster[0], 2u);
  EXPECT_EQ(last->cluster[1], 1u);
  EXPECT_EQ(last->grid[0], 4u);
  EXPECT_EQ(last->shared_memory_bytes, 100u * 1024);
  std::vector<float> result(g.c.size());
  device.copy_to_host(result.data(), c, result.size() * 4);
  EXPECT_EQ(result, g.c);

  const Error e = error_of([&] {
    launch_with_cluster(device, module.function(kGemmName), {3, 1, 1}, {128, 1, 1}, {2, 1, 1}, 0,
                        nullptr, args);
  });
  EXPECT_EQ(e.status(), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(e.message(), "not a whole number of clusters (2, 1, 1)")) << e.message();
  for (uint64_t p : {a, b, c}) device.free(p);
}

TEST(RuntimeLaunch, ClustersNeedLaunchKernelEx) {
  ScopedEnv hide("HM_MOCK_HIDE_SYMBOLS", "cuLaunchKernelEx");
  const auto driver = Driver::load(mock_driver_path());
  const Device device(driver, 0);
  const Module module(device, kGemmPtx);
  const Error e = error_of([&] {
    launch_with_cluster(device, module.function(kGemmName), {2, 1, 1}, {32, 1, 1}, {2, 1, 1}, 0,
                        nullptr, nullptr);
  });
  EXPECT_EQ(e.status(), HM_ERROR_UNSUPPORTED);
  EXPECT_TRUE(contains(e.message(), "cuLaunchKernelEx")) << e.message();
}

TEST(RuntimeLaunch, OneDeviceServesTwoThreadsAtOnce) {
  const auto driver = Driver::load(mock_driver_path());
  const Device device(driver, 0);
  const Module module(device, kGemmPtx);
  const CUfunction gemm = module.function(kGemmName);
  std::atomic<int> failures{0};
  auto worker = [&](int seed) {
    try {
      const CUstream stream = device.create_stream();
      for (int i = 0; i < 25; ++i) {
        const Gemm g = make_gemm(3 + i % 4, 5 + seed, 7, seed * 100 + i);
        if (run_gemm(device, gemm, g, i % 2 ? stream : nullptr) != g.c) ++failures;
      }
      device.destroy_stream(stream);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "thread " << seed << ": " << e.what();
      ++failures;
    }
  };
  std::thread first(worker, 1), second(worker, 2);
  first.join();
  second.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace hm::runtime
