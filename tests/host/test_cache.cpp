// The kernel cache: hits and misses, what the key depends on, JIT-disabled misses, explain_miss,
// the default directory and stats. A fake compiler stands in for NVRTC (no toolkit needed).
#include <fcntl.h>
#include <sys/stat.h>

#include <ctime>
#include <fstream>
#include <set>

#include "jit/sha256.hpp"
#include "test_cache_support.hpp"

namespace hm::jit::test {
namespace {

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

TEST_F(CacheTest, MissCompilesThenHitLoads) {
  FakeCompiler compiler;
  Cache cache(dir_, false, false);
  Cache::Result first, second;
  const CompiledKernel a = cache.get_or_compile(test_request(), compiler, &first);
  EXPECT_EQ(first.outcome, Cache::Outcome::kCompiled);
  EXPECT_EQ(compiler.compiles, 1);
  EXPECT_EQ(first.entry_dir, cache.entry_dir(first.key));
  EXPECT_TRUE(first.note.empty()) << first.note;
  for (const char* f : {"meta.json", "kernel.cubin", "kernel.cu"})
    EXPECT_TRUE(exists(first.entry_dir + "/" + f)) << f;

  const CompiledKernel b = cache.get_or_compile(test_request(), compiler, &second);
  EXPECT_EQ(second.outcome, Cache::Outcome::kHit);
  EXPECT_EQ(compiler.compiles, 1);
  EXPECT_EQ(second.key.hex, first.key.hex);
  EXPECT_EQ(b.image, a.image);
  EXPECT_FALSE(b.is_ptx);
  EXPECT_EQ(b.log, a.log);  // warnings survive the round trip

  // Another Cache object (another process, in practice) on the same directory hits too.
  Cache other(dir_, false, false);
  EXPECT_EQ(other.get_or_compile(test_request(), compiler).image, a.image);
  EXPECT_EQ(compiler.compiles, 1);
}

// A hit marks the entry used (meta.json's modification time, which Cache::prune reads), so
// pruning by age keeps what is in use and removes what is not.
TEST_F(CacheTest, HitsMarkEntriesUsedAndPruneKeepsThem) {
  FakeCompiler compiler;
  Cache cache(dir_, false, false);
  Cache::Result r;
  cache.get_or_compile(test_request(), compiler, &r);
  const std::string meta = r.entry_dir + "/meta.json";
  const struct timespec long_ago[2] = {{0, UTIME_OMIT}, {std::time(nullptr) - 30 * 86400, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, meta.c_str(), long_ago, 0), 0);
  EXPECT_EQ(cache.prune(std::chrono::hours(24 * 7), UINT64_MAX).entries, 1u)
      << "unused for 30 days: pruned";
  EXPECT_FALSE(exists(r.entry_dir));
  cache.get_or_compile(test_request(), compiler, &r);  // compiled again
  ASSERT_EQ(::utimensat(AT_FDCWD, meta.c_str(), long_ago, 0), 0);
  Cache::Result hit;
  cache.get_or_compile(test_request(), compiler, &hit);
  ASSERT_EQ(hit.outcome, Cache::Outcome::kHit);
  EXPECT_EQ(cache.prune(std::chrono::hours(24 * 7), UINT64_MAX).entries, 0u) << "used just now";
  EXPECT_TRUE(exists(r.entry_dir));
  EXPECT_EQ(compiler.compiles, 2);
}

TEST_F(CacheTest, EntryLayoutIsVersionArchBucketKey) {
  FakeCompiler compiler;
  Cache cache(dir_, false, false);
  Cache::Result r;
  cache.get_or_compile(test_request("k", "sm_80"), compiler, &r);
  EXPECT_EQ(r.entry_dir, dir_ + "/v1/sm_80/" + r.key.hex.substr(0, 2) + "/" + r.key.hex);
  std::ifstream source(r.entry_dir + "/kernel.cu");
  std::string text((std::istreambuf_iterator<char>(source)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, test_request().source);
}

TEST_F(CacheTest, PtxTargetsStorePtx) {
  FakeCompiler compiler;
  Cache cache(dir_, false, false);
  Cache::Result r;
  const CompiledKernel k = cache.get_or_compile(test_request("k", "compute_90"), compiler, &r);
  EXPECT_TRUE(k.is_ptx);
  EXPECT_TRUE(exists(r.entry_dir + "/kernel.ptx"));
  EXPECT_TRUE(cache.get_or_compile(test_request("k", "compute_90"), compiler).is_ptx);
  EXPECT_EQ(compiler.compiles, 1);
}

TEST_F(CacheTest, KeyHasEveryComponent) {
  FakeCompiler compiler;
  Cache cache(dir_, false, false);
  const CacheKey key = cache.key(test_request(), compiler);
  const std::map<std::string, std::string> expected = {
      {"cache_format", "1"},
      {"library_version", std::to_string(HM_VERSION_MAJOR) + "." +
                              std::to_string(HM_VERSION_MINOR) + "." +
                              std::to_string(HM_VERSION_PATCH)},
      {"kernel_sources", test_sources().hash()},
      {"source_sha256", sha256_hex(test_request().source)},
      {"compiler", "fake 1.0"},
      {"compiler_options", R"(["-std=c++17"])"},
      {"options", R"(["-DHM_TEST=1"])"},
      {"arch", "sm_90a"},
      {"name", "test_kernel"},
  };
  EXPECT_EQ(key.components, expected);
  EXPECT_EQ(key.hex.size(), 64u);
  EXPECT_EQ(cache.key(test_request(), compiler).hex, key.hex) << "keys must be deterministic";
  EXPECT_NE(key.describe().find(key.hex), std::string::npos);
  EXPECT_NE(key.describe().find("compiler: fake 1.0"), std::string::npos);
}

TEST_F(CacheTest, KeyChangesWithEachComponent) {
  FakeCompiler compiler;
  Cache cache(dir_, false, false);
  const KernelSources other_contents = KernelSources::from_files(
      {{"humming/test/a.cuh", "#pragma once\nconstexpr int kA = 2;\n"}}, "edited");
  const KernelSources other_path = KernelSources::from_files(
      {{"humming/test/b.cuh", "#pragma once\nconstexpr int kA = 1;\n"}}, "renamed");

  std::vector<std::pair<std::string, std::string>> keys;  // (what changed, hex)
  auto add = [&](const std::string& what, const CompileRequest& r, const Compiler& c) {
    keys.emplace_back(what, cache.key(r, c).hex);
  };
  add("base", test_request(), compiler);
  add("name", test_request("other_kernel"), compiler);
  add("arch", test_request("test_kernel", "sm_90"), compiler);
  add("arch suffix", test_request("test_kernel", "sm_90f"), compiler);
  add("ptx arch", test_request("test_kernel", "compute_90a"), compiler);
  CompileRequest r = test_request();
  r.source += " ";
  add("source", r, compiler);
  r = test_request();
  r.options.push_back("-DHM_OTHER=1");
  add("options", r, compiler);
  // Order can matter to a compiler (-D then -U), so it is part of the key.
  CompileRequest reversed = test_request();
  reversed.options = {"-DHM_OTHER=1", "-DHM_TEST=1"};
  add("option order", reversed, compiler);
  r = test_request();
  r.sources = &other_contents;
  add("header contents", r, compiler);
  r.sources = &other_path;
  add("header path", r, compiler);
  add("compiler id", test_request(), FakeCompiler("fake 1.1"));
  FakeCompiler flagged;
  flagged.builtin_ = {"-std=c++17", "-lineinfo"};
  add("compiler builtin options", test_request(), flagged);

  std::set<std::string> distinct;
  for (const auto& [what, hex] : keys)
    EXPECT_TRUE(distinct.insert(hex).second) << what << " did not change the key";

  // make_cache_key itself: every name and value matters, and no two component sets collide by
  // concatenation.
  const CacheKey base = make_cache_key({{"a", "bc"}});
  EXPECT_NE(make_cache_key({{"ab", "c"}}).hex, base.hex);
  EXPECT_NE(make_cache_key({{"a", "bc"}, {"d", ""}}).hex, base.hex);
  EXPECT_NE(make_cache_key({{"a", "b"}, {"c", ""}}).hex, make_cache_key({{"a", "b;c"}}).hex);
  EXPECT_EQ(make_cache_key({{"a", "bc"}}).hex, base.hex);
  EXPECT_NE(make_cache_key({{"library_version", "0.1.0"}}).hex,
            make_cache_key({{"library_version", "0.1.1"}}).hex);
}

TEST_F(CacheTest, MalformedArchIsRejected) {
  FakeCompiler compiler;
  Cache cache(dir_, false, false);
  for (const char* arch :
       {"", "sm90", "sm_", "sm_9", "sm_90b", "sm_90a/../x", "compute_", "gfx90a"}) {
    try {
      cache.get_or_compile(test_request("k", arch), compiler);
      ADD_FAILURE() << "arch '" << arch << "' accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), HM_ERROR_INVALID_ARGUMENT) << arch;
    }
  }
  EXPECT_EQ(compiler.compiles, 0);
  EXPECT_FALSE(exists(dir_));
}

// Keys are stored in meta.json, so their text must be UTF-8.
TEST_F(CacheTest, NonUtf8NamesAndOptionsAreRejected) {
  FakeCompiler compiler;
  Cache cache(dir_, false, false);
  CompileRequest bad_option = test_request();
  bad_option.options.push_back("-DX=\xff");
  CompileRequest bad_name = test_request("k\xc3");
  for (const CompileRequest& r : {bad_option, bad_name}) {
    try {
      cache.get_or_compile(r, compiler);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), HM_ERROR_INVALID_ARGUMENT);
      EXPECT_NE(e.message().find("UTF-8"), std::string::npos) << e.message();
    }
  }
  EXPECT_EQ(compiler.compiles, 0);
}

TEST_F(CacheTest, JitDisabledMissNamesTheKey) {
  FakeCompiler compiler;
  Cache cache(dir_, /*jit_disabled=*/true, false);
  EXPECT_TRUE(cache.jit_disabled());
  try {
    cache.get_or_compile(test_request(), compiler);
    FAIL() << "a miss with JIT disabled must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_JIT_DISABLED);
    const std::string m = e.message();
    EXPECT_NE(m.find(cache.key(test_request(), compiler).hex), std::string::npos) << m;
    EXPECT_NE(m.find("source_sha256: "), std::string::npos) << m;
    EXPECT_NE(m.find("compiler: fake 1.0"), std::string::npos) << m;
    EXPECT_NE(m.find("no entry for this kernel name"), std::string::npos) << m;
  }
  EXPECT_EQ(compiler.compiles, 0);

  // Once another (JIT-enabled) cache filled the entry, the disabled one loads it.
  Cache filler(dir_, false, false);
  filler.get_or_compile(test_request(), compiler);
  Cache::Result r;
  cache.get_or_compile(test_request(), compiler, &r);
  EXPECT_EQ(r.outcome, Cache::Outcome::kHit);
  EXPECT_EQ(compiler.compiles, 1);
}

TEST_F(CacheTest, EnvironmentDisablesJit) {
  FakeCompiler compiler;
  {
    EnvGuard env("HUMMING_DISABLE_JIT", "1");
    Cache cache(dir_, false, false);
    EXPECT_TRUE(cache.jit_disabled());
    try {
      cache.get_or_compile(test_request(), compiler);
      FAIL() << "HUMMING_DISABLE_JIT=1 must make a miss an error";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), HM_ERROR_JIT_DISABLED);
      EXPECT_NE(e.message().find(cache.key(test_request(), compiler).hex), std::string::npos);
    }
  }
  for (const char* off : {"0", "", "false", "OFF"}) {
    EnvGuard env("HUMMING_DISABLE_JIT", off);
    EXPECT_FALSE(Cache(dir_, false, false).jit_disabled()) << "'" << off << "'";
  }
  EXPECT_EQ(compiler.compiles, 0);
}

TEST_F(CacheTest, NoCacheCompilesEveryTimeAndWritesNothing) {
  FakeCompiler compiler;
  Cache cache(dir_, false, /*no_cache=*/true);
  Cache::Result r;
  cache.get_or_compile(test_request(), compiler, &r);
  cache.get_or_compile(test_request(), compiler, &r);
  EXPECT_EQ(compiler.compiles, 2);
  EXPECT_EQ(r.outcome, Cache::Outcome::kCompiled);
  EXPECT_TRUE(r.entry_dir.empty());
  EXPECT_FALSE(exists(dir_));
  EXPECT_THROW(Cache(dir_, true, true).get_or_compile(test_request(), compiler), Error);
}

TEST_F(CacheTest, CompileErrorsPropagateAndWriteNothing) {
  FakeCompiler compiler;
  compiler.fail_with_log = "kernel.cu(3): error: expected a ';'";
  Cache cache(dir_, false, false);
  try {
    cache.get_or_compile(test_request(), compiler);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_COMPILE);
    EXPECT_NE(e.message().find("expected a ';'"), std::string::npos);
  }
  EXPECT_EQ(cache.stats().entries, 0u);
}

TEST_F(CacheTest, UnwritableCacheStillReturnsTheKernel) {
  FakeCompiler compiler;
  // A regular file where a directory must be: mkdir fails even for root.
  std::ofstream(root_ + "/blocker") << "x";
  Cache cache(root_ + "/blocker/cache", false, false);
  Cache::Result r;
  const CompiledKernel k = cache.get_or_compile(test_request(), compiler, &r);
  EXPECT_FALSE(k.image.empty());
  EXPECT_EQ(r.outcome, Cache::Outcome::kCompiled);
  EXPECT_TRUE(r.entry_dir.empty());
  EXPECT_NE(r.note.find("not saved"), std::string::npos) << r.note;
}

TEST_F(CacheTest, ExplainMissNamesWhatDiffers) {
  FakeCompiler compiler;
  Cache cache(dir_, false, false);
  EXPECT_NE(cache.explain_miss(test_request(), compiler).find("no entry for this kernel name"),
            std::string::npos);
  cache.get_or_compile(test_request(), compiler);
  EXPECT_NE(cache.explain_miss(test_request(), compiler).find("no miss"), std::string::npos);

  const std::string by_compiler = cache.explain_miss(test_request(), FakeCompiler("fake 2.0"));
  EXPECT_NE(by_compiler.find("compiler: fake 1.0 (cached) vs fake 2.0 (requested)"),
            std::string::npos)
      << by_compiler;
  EXPECT_EQ(by_compiler.find("source differs"), std::string::npos) << by_compiler;

  CompileRequest edited = test_request();
  edited.source += "// changed\n";
  edited.options = {"-DHM_TEST=2"};
  const std::string by_source = cache.explain_miss(edited, compiler);
  EXPECT_NE(by_source.find("generated source differs"), std::string::npos) << by_source;
  EXPECT_NE(by_source.find(R"(options: ["-DHM_TEST=1"] (cached) vs ["-DHM_TEST=2"] (requested))"),
            std::string::npos)
      << by_source;

  const KernelSources headers = KernelSources::from_files({{"humming/test/a.cuh", "changed"}}, "x");
  CompileRequest new_headers = test_request();
  new_headers.sources = &headers;
  EXPECT_NE(cache.explain_miss(new_headers, compiler).find("kernel headers differ"),
            std::string::npos);

  const std::string by_arch = cache.explain_miss(test_request("test_kernel", "sm_100a"), compiler);
  EXPECT_NE(by_arch.find("entries for this kernel exist for: sm_90a"), std::string::npos)
      << by_arch;
  EXPECT_NE(
      cache.explain_miss(test_request("unknown"), compiler).find("no entry for this kernel name"),
      std::string::npos);
}

TEST_F(CacheTest, DefaultDirPrecedence) {
  EnvGuard home("HOME", "/home/tester");
  {
    EnvGuard a("HUMMING_CACHE_DIR", "/explicit/cache");
    EnvGuard b("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(Cache::default_dir(), "/explicit/cache");
    EXPECT_EQ(Cache("", false, false).dir(), "/explicit/cache");
  }
  {
    EnvGuard a("HUMMING_CACHE_DIR", "");
    EnvGuard b("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(Cache::default_dir(), "/xdg/humming");
  }
  {
    EnvGuard a("HUMMING_CACHE_DIR", nullptr);
    EnvGuard b("XDG_CACHE_HOME", "relative/ignored");
    EXPECT_EQ(Cache::default_dir(), "/home/tester/.cache/humming");
  }
  {
    EnvGuard a("HUMMING_CACHE_DIR", nullptr);
    EnvGuard b("XDG_CACHE_HOME", nullptr);
    EXPECT_EQ(Cache::default_dir(), "/home/tester/.cache/humming");
    EXPECT_EQ(Cache("/given/dir/", false, false).dir(), "/given/dir");
  }
}

TEST_F(CacheTest, StatsCountEntriesAndBytes) {
  FakeCompiler compiler;
  Cache cache(dir_, false, false);
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_EQ(cache.stats().bytes, 0u);
  Cache::Result a, b;
  const CompiledKernel ka = cache.get_or_compile(test_request("a"), compiler, &a);
  const CompiledKernel kb = cache.get_or_compile(test_request("b", "sm_80"), compiler, &b);
  cache.get_or_compile(test_request("a"), compiler);  // a hit adds nothing
  const Cache::Stats s = cache.stats();
  EXPECT_EQ(s.entries, 2u);
  EXPECT_GE(s.bytes, ka.image.size() + kb.image.size() + 2 * test_request().source.size());
  EXPECT_LT(s.bytes, 64u * 1024);
}

TEST_F(CacheTest, StaleScratchDirectoriesArePruned) {
  FakeCompiler compiler;
  Cache cache(dir_, false, false);
  cache.get_or_compile(test_request("first"), compiler);
  const std::string stale = dir_ + "/tmp/0123456789abcdef.dead00";
  ASSERT_EQ(::mkdir(stale.c_str(), 0755), 0);
  std::ofstream(stale + "/kernel.cubin") << "half written";
  const std::string fresh = dir_ + "/tmp/fresh.dead01";
  ASSERT_EQ(::mkdir(fresh.c_str(), 0755), 0);
  // Two hours ago: older than any write in progress can be.
  struct timespec times[2];
  times[0].tv_sec = times[1].tv_sec = ::time(nullptr) - 2 * 3600;
  times[0].tv_nsec = times[1].tv_nsec = 0;
  ASSERT_EQ(::utimensat(AT_FDCWD, stale.c_str(), times, 0), 0);
  cache.get_or_compile(test_request("second"), compiler);
  EXPECT_FALSE(exists(stale));
  EXPECT_TRUE(exists(fresh));
}

}  // namespace
}  // namespace hm::jit::test
