// The runtime half of the C ABI — contexts, kernels, launches, device helpers — driven through
// the public functions only, on the mock driver (HUMMING_CUDA_DRIVER_PATH), with real NVRTC
// compiles into a private cache. The process-wide driver is the mock (see MockDriverTest); the
// mock's failure switches are read at call time, so each test sets the ones it needs.
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "api/support/mock_driver_test.hpp"
#include "humming.h"
#include "mock_driver/mock_loader.hpp"
#include "support/reference_gemm_params.hpp"

namespace {

using hm::test::last_error;
using hm::test::reference_gemm_params;
using hm::test::ScopedEnv;

class ContextApi : public hm::test::MockDriverTest {
 protected:
  hm_context_t* make(int device, const char* arch = nullptr, uint32_t flags = 0) {
    return hm::test::create_context(cache_.path(), device, arch, flags);
  }
  const hm::test::TemporaryDirectory cache_{"humming-ctx-test"};
};

TEST_F(ContextApi, DeviceInfoComesFromTheDriver) {
  hm_context_t* ctx = make(0);
  ASSERT_NE(ctx, nullptr);
  hm_device_info_t info;
  hm_device_info_init(&info);
  ASSERT_EQ(hm_context_device_info(ctx, &info), HM_SUCCESS) << last_error();
  EXPECT_EQ(info.device, 0);
  EXPECT_EQ(info.cc_major, 9);
  EXPECT_STREQ(info.arch, "sm_90a");
  EXPECT_NE(std::string(info.name).find("Mock"), std::string::npos) << info.name;
  EXPECT_GT(info.multiprocessors, 0);
  hm_context_destroy(ctx);

  hm_context_t* second = make(1);  // the mock's second device is cc 8.0
  ASSERT_NE(second, nullptr);
  ASSERT_EQ(hm_context_device_info(second, &info), HM_SUCCESS);
  EXPECT_STREQ(info.arch, "sm_80");
  hm_context_destroy(second);
}

TEST_F(ContextApi, RuntimeInfoSeesTheMock) {
  hm_runtime_info_t info;
  hm_runtime_info_init(&info);
  ASSERT_EQ(hm_runtime_info(&info), HM_SUCCESS) << last_error();
  EXPECT_EQ(info.driver_version, 13000);
  EXPECT_EQ(info.device_count, 2);
  EXPECT_NE(std::string(info.driver_path).find("humming_mock_cuda"), std::string::npos);
  EXPECT_STREQ(info.driver_error, "");
}

TEST_F(ContextApi, BadOptionsNameTheField) {
  hm_context_options_t o;
  hm_context_options_init(&o);
  hm_context_t* ctx = reinterpret_cast<hm_context_t*>(0x1);
  o.device = 7;
  EXPECT_EQ(hm_context_create(&o, &ctx), HM_ERROR_NO_DEVICE);
  EXPECT_EQ(ctx, nullptr) << "*out is NULL on failure";
  EXPECT_NE(last_error().find("2"), std::string::npos) << last_error();  // names the count

  hm_context_options_init(&o);
  o.device = HM_NO_DEVICE;  // without target_arch
  EXPECT_EQ(hm_context_create(&o, &ctx), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("target_arch"), std::string::npos) << last_error();

  o.target_arch = "sm_91q";
  EXPECT_EQ(hm_context_create(&o, &ctx), HM_ERROR_PARSE) << last_error();

  hm_context_options_init(&o);
  o.struct_size = 4;
  EXPECT_EQ(hm_context_create(&o, &ctx), HM_ERROR_INVALID_STRUCT_SIZE);
  EXPECT_NE(last_error().find("struct_size"), std::string::npos);

  hm_context_options_init(&o);
  o.flags = 0x80;
  EXPECT_EQ(hm_context_create(&o, &ctx), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hm_context_create(nullptr, &ctx), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("options"), std::string::npos);
  hm_context_options_init(&o);
  EXPECT_EQ(hm_context_create(&o, nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("out"), std::string::npos);
}

TEST_F(ContextApi, DestroyNullIsANoOp) {
  hm_context_destroy(nullptr);
  hm_kernel_destroy(nullptr);
  hm_launch_params_destroy(nullptr);
  hm_format_destroy(nullptr);
}

// The whole path: codegen -> NVRTC -> cache -> module load -> launch marshalling -> the mock's
// host implementation of the kernel computes C, which must be exact on small integers.
TEST_F(ContextApi, ReferenceGemmRunsThroughTheWholePath) {
  hm::test::MockControl mock;
  mock.reset();
  hm_context_t* ctx = make(0);
  ASSERT_NE(ctx, nullptr);
  hm_kernel_t* kernel = nullptr;
  ASSERT_EQ(hm_kernel_create_reference_gemm(ctx, HM_DTYPE_F32, HM_DTYPE_F32, &kernel), HM_SUCCESS)
      << last_error();
  char name[64];
  ASSERT_EQ(hm_kernel_name(kernel, name, sizeof name, nullptr), HM_SUCCESS);
  EXPECT_STREQ(name, "reference_gemm_f32_f32");
  size_t key_length = 0;
  EXPECT_EQ(hm_kernel_cache_key(kernel, nullptr, 0, &key_length), HM_ERROR_BUFFER_TOO_SMALL);
  EXPECT_EQ(key_length, 64u);

  const int64_t m = 5, n = 7, k = 9;
  std::vector<float> a(m * k), b(n * k), c(m * n, -1.0f);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(static_cast<int>(i % 5) - 2);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(static_cast<int>(i % 3) - 1);
  uint64_t da = 0, db = 0, dc = 0;
  ASSERT_EQ(hm_device_alloc(ctx, a.size() * 4, &da), HM_SUCCESS) << last_error();
  ASSERT_EQ(hm_device_alloc(ctx, b.size() * 4, &db), HM_SUCCESS);
  ASSERT_EQ(hm_device_alloc(ctx, c.size() * 4, &dc), HM_SUCCESS);
  ASSERT_EQ(hm_copy_to_device(ctx, da, a.data(), a.size() * 4), HM_SUCCESS);
  ASSERT_EQ(hm_copy_to_device(ctx, db, b.data(), b.size() * 4), HM_SUCCESS);
  ASSERT_EQ(hm_copy_to_device(ctx, dc, c.data(), c.size() * 4), HM_SUCCESS);

  hm_launch_params_t* p = reference_gemm_params(da, db, dc, m, n, k);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(hm_kernel_launch(kernel, p, nullptr), HM_SUCCESS) << last_error();
  ASSERT_EQ(hm_stream_synchronize(ctx, nullptr), HM_SUCCESS);
  ASSERT_EQ(hm_copy_to_host(ctx, c.data(), dc, c.size() * 4), HM_SUCCESS);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float ref = 0;
      for (int64_t l = 0; l < k; ++l) ref += a[i * k + l] * b[j * k + l];
      EXPECT_EQ(c[i * n + j], ref) << i << "," << j;
    }
  auto launch = mock.last_launch();
  ASSERT_TRUE(launch.has_value());
  EXPECT_STREQ(launch->function, "hm_reference_gemm_f32_f32");
  EXPECT_EQ(launch->executed, 1);
  EXPECT_EQ(launch->grid[0], 1u);  // ceil(7 / 16)
  EXPECT_EQ(launch->block[0] * launch->block[1], 256u);

  // Argument errors are reported, never launched.
  hm_launch_params_set_int(p, HM_ARG_M, 0);
  EXPECT_EQ(hm_kernel_launch(kernel, p, nullptr), HM_ERROR_INVALID_ARGUMENT);
  hm_launch_params_set_int(p, HM_ARG_M, m);
  hm_launch_params_set_pointer(p, HM_ARG_B, 0);
  EXPECT_EQ(hm_kernel_launch(kernel, p, nullptr), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("HM_ARG_B"), std::string::npos) << last_error();
  EXPECT_EQ(hm_launch_params_set_pointer(p, 40, 1), HM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(hm_launch_params_set_int(p, HM_ARG_A, 1), HM_ERROR_INVALID_ARGUMENT);

  // The kernel keeps what it needs alive: the context may go first.
  hm_launch_params_set_pointer(p, HM_ARG_B, db);
  hm_device_free(ctx, da);
  hm_device_free(ctx, db);
  hm_device_free(ctx, dc);
  EXPECT_EQ(mock.live_allocations(), 0);
  hm_context_destroy(ctx);
  hm_kernel_destroy(kernel);
  hm_launch_params_destroy(p);
  EXPECT_EQ(mock.live_modules(), 0);
}

TEST_F(ContextApi, SecondKernelComesFromTheCacheWithTheSameKey) {
  hm_context_t* ctx = make(0);
  hm_kernel_t *k1 = nullptr, *k2 = nullptr;
  ASSERT_EQ(hm_kernel_create_reference_gemm(ctx, HM_DTYPE_F16, HM_DTYPE_BF16, &k1), HM_SUCCESS)
      << last_error();
  hm_context_destroy(ctx);
  // A load-only context finds it; a kernel it has never seen is a clear JIT_DISABLED error.
  ctx = make(0, nullptr, HM_CONTEXT_DISABLE_JIT);
  ASSERT_EQ(hm_kernel_create_reference_gemm(ctx, HM_DTYPE_F16, HM_DTYPE_BF16, &k2), HM_SUCCESS)
      << last_error();
  char key1[80], key2[80];
  hm_kernel_cache_key(k1, key1, sizeof key1, nullptr);
  hm_kernel_cache_key(k2, key2, sizeof key2, nullptr);
  EXPECT_STREQ(key1, key2);
  hm_kernel_t* k3 = nullptr;
  EXPECT_EQ(hm_kernel_create_reference_gemm(ctx, HM_DTYPE_BF16, HM_DTYPE_F16, &k3),
            HM_ERROR_JIT_DISABLED);
  EXPECT_EQ(k3, nullptr);
  EXPECT_NE(last_error().find("reference_gemm_bf16_f16"), std::string::npos) << last_error();
  hm_kernel_destroy(k1);
  hm_kernel_destroy(k2);
  hm_context_destroy(ctx);
}

TEST_F(ContextApi, DisableJitFromTheEnvironment) {
  ScopedEnv no_jit("HUMMING_DISABLE_JIT", "1");
  hm_context_t* ctx = make(0);
  hm_kernel_t* k = nullptr;
  EXPECT_EQ(hm_kernel_create_reference_gemm(ctx, HM_DTYPE_F32, HM_DTYPE_F32, &k),
            HM_ERROR_JIT_DISABLED);
  hm_context_destroy(ctx);
}

TEST_F(ContextApi, AheadOfTimeContextCompilesButCannotLaunch) {
  // Needs no driver at all.
  ScopedEnv no_driver("HUMMING_CUDA_DRIVER_PATH", "/nonexistent/libcuda.so.1");
  hm_context_t* ctx = make(HM_NO_DEVICE, "sm_80");
  ASSERT_NE(ctx, nullptr);
  hm_device_info_t info;
  hm_device_info_init(&info);
  ASSERT_EQ(hm_context_device_info(ctx, &info), HM_SUCCESS);
  EXPECT_EQ(info.device, HM_NO_DEVICE);
  EXPECT_STREQ(info.arch, "sm_80");
  hm_kernel_t* k = nullptr;
  ASSERT_EQ(hm_kernel_create_reference_gemm(ctx, HM_DTYPE_BF16, HM_DTYPE_BF16, &k), HM_SUCCESS)
      << last_error();
  hm_launch_params_t* p = nullptr;
  hm_launch_params_create(&p);
  EXPECT_EQ(hm_kernel_launch(k, p, nullptr), HM_ERROR_NO_DEVICE);
  uint64_t ptr = 0;
  EXPECT_EQ(hm_device_alloc(ctx, 16, &ptr), HM_ERROR_NO_DEVICE);
  hm_launch_params_destroy(p);
  hm_kernel_destroy(k);
  hm_context_destroy(ctx);
}

TEST_F(ContextApi, UnsupportedReferenceTypesAreRefused) {
  hm_context_t* ctx = make(0);
  hm_kernel_t* k = nullptr;
  EXPECT_EQ(hm_kernel_create_reference_gemm(ctx, HM_DTYPE_E4M3, HM_DTYPE_F16, &k),
            HM_ERROR_UNSUPPORTED);
  EXPECT_EQ(hm_kernel_create_reference_gemm(ctx, 0xdeadbeefu, HM_DTYPE_F16, &k),
            HM_ERROR_INVALID_ARGUMENT);
  hm_context_destroy(ctx);
}

TEST_F(ContextApi, DriverFailuresBecomeStatuses) {
  hm_context_t* ctx = make(0);
  setenv("HM_MOCK_FAIL_ALLOC", "1", 1);
  uint64_t ptr = 0;
  EXPECT_EQ(hm_device_alloc(ctx, 1024, &ptr), HM_ERROR_DEVICE_OUT_OF_MEMORY);
  EXPECT_NE(last_error().find("OUT_OF_MEMORY"), std::string::npos) << last_error();
  unsetenv("HM_MOCK_FAIL_ALLOC");

  hm_kernel_t* k = nullptr;
  ASSERT_EQ(hm_kernel_create_reference_gemm(ctx, HM_DTYPE_F32, HM_DTYPE_F32, &k), HM_SUCCESS);
  uint64_t buf = 0;
  ASSERT_EQ(hm_device_alloc(ctx, 4096, &buf), HM_SUCCESS);
  hm_launch_params_t* p = reference_gemm_params(buf, buf, buf, 4, 4, 4);
  setenv("HM_MOCK_FAIL_LAUNCH", "1", 1);
  EXPECT_EQ(hm_kernel_launch(k, p, nullptr), HM_ERROR_LAUNCH);
  EXPECT_NE(last_error().find("hm_reference_gemm_f32_f32"), std::string::npos) << last_error();
  unsetenv("HM_MOCK_FAIL_LAUNCH");
  EXPECT_EQ(hm_kernel_launch(k, p, nullptr), HM_SUCCESS) << last_error();
  hm_launch_params_destroy(p);
  hm_device_free(ctx, buf);
  hm_kernel_destroy(k);
  hm_context_destroy(ctx);
}

TEST_F(ContextApi, ErrorMessagesAreThreadLocal) {
  hm_clear_last_error();
  std::thread([] {
    hm_context_t* ctx = nullptr;
    EXPECT_EQ(hm_context_create(nullptr, &ctx), HM_ERROR_INVALID_ARGUMENT);
    EXPECT_GT(hm_last_error_message(nullptr, 0), 0u);
  }).join();
  EXPECT_EQ(hm_last_error_message(nullptr, 0), 0u) << "another thread's error leaked here";
}

// One context, one kernel, many threads each with its own launch params.
TEST_F(ContextApi, ConcurrentLaunchesFromSeveralThreads) {
  hm_context_t* ctx = make(0);
  hm_kernel_t* k = nullptr;
  ASSERT_EQ(hm_kernel_create_reference_gemm(ctx, HM_DTYPE_F32, HM_DTYPE_F32, &k), HM_SUCCESS);
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::vector<int> ok(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const int64_t m = 3 + t, n = 4, k_dim = 5;
      std::vector<float> a(m * k_dim, 1.0f + t), b(n * k_dim, 2.0f), c(m * n);
      uint64_t da = 0, db = 0, dc = 0;
      if (hm_device_alloc(ctx, a.size() * 4, &da) || hm_device_alloc(ctx, b.size() * 4, &db) ||
          hm_device_alloc(ctx, c.size() * 4, &dc))
        return;
      hm_copy_to_device(ctx, da, a.data(), a.size() * 4);
      hm_copy_to_device(ctx, db, b.data(), b.size() * 4);
      hm_launch_params_t* p = reference_gemm_params(da, db, dc, m, n, k_dim);
      bool good = true;
      for (int iter = 0; iter < 20 && good; ++iter) {
        good = hm_kernel_launch(k, p, nullptr) == HM_SUCCESS &&
               hm_stream_synchronize(ctx, nullptr) == HM_SUCCESS &&
               hm_copy_to_host(ctx, c.data(), dc, c.size() * 4) == HM_SUCCESS;
        for (float v : c) good = good && v == (1.0f + t) * 2.0f * k_dim;
      }
      hm_launch_params_destroy(p);
      hm_device_free(ctx, da);
      hm_device_free(ctx, db);
      hm_device_free(ctx, dc);
      ok[t] = good;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(ok[t], 1) << "thread " << t;
  hm_kernel_destroy(k);
  hm_context_destroy(ctx);
}

}  // namespace
