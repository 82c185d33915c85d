// The cache with a real compiler: a kernel compiled once is loaded from disk afterwards, by a
// load-only cache too, and a switch of compiler is a miss that explain_miss names.
#include <chrono>
#include <cstdio>

#include "jit/cache.hpp"
#include "jit_test_support.hpp"

namespace hm::jit::test {
namespace {

class JitCacheTest : public CacheTest {};

TEST_F(JitCacheTest, CompileOnceThenLoad) {
  const auto nvrtc = require_compiler(HM_COMPILER_NVRTC);
  Cache cache(dir_, false, false);
  Cache::Result first, second;
  const auto t0 = std::chrono::steady_clock::now();
  const CompiledKernel built = cache.get_or_compile(selftest_request("sm_90a"), *nvrtc, &first);
  const auto t1 = std::chrono::steady_clock::now();
  const CompiledKernel loaded = Cache(dir_, /*jit_disabled=*/true, false)
                                    .get_or_compile(selftest_request("sm_90a"), *nvrtc, &second);
  const auto t2 = std::chrono::steady_clock::now();
  EXPECT_EQ(first.outcome, Cache::Outcome::kCompiled);
  EXPECT_EQ(second.outcome, Cache::Outcome::kHit);
  EXPECT_EQ(loaded.image, built.image);
  EXPECT_TRUE(is_elf(loaded.image));
  // Timings are for the record only (benchmarks own the targets).
  std::printf("[ timing ] nvrtc compile %.1f ms, cache hit %.2f ms\n",
              std::chrono::duration<double, std::milli>(t1 - t0).count(),
              std::chrono::duration<double, std::milli>(t2 - t1).count());

  // The same request with NVCC is another key; the miss explanation names the compiler.
  const auto nvcc = require_compiler(HM_COMPILER_NVCC);
  const std::string why = cache.explain_miss(selftest_request("sm_90a"), *nvcc);
  EXPECT_NE(why.find("compiler: " + nvrtc->id() + " (cached) vs " + nvcc->id() + " (requested)"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("compiler_options"), std::string::npos) << why;
}

}  // namespace
}  // namespace hm::jit::test
