// The cache's files as other users and other processes see them: entry and lock modes follow
// the umask (a cache filled by root is readable by everyone the umask allows), a lock file this
// user cannot write still locks, nvcc's environment flags are part of the key, an image of the
// wrong size is refused before it is read, only the entry found corrupt is discarded, stale nvcc
// scratch directories are pruned, and `humming compile` fails when nothing was saved.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "jit/cache.hpp"
#include "jit/cache_entry.hpp"
#include "jit/file_util.hpp"
#include "jit_test_support.hpp"

namespace hm::jit::test {
namespace {

namespace fs = std::filesystem;

class CacheFilesTest : public CacheTest {};

// Sets the process umask for the guard's lifetime.
class UmaskGuard {
 public:
  explicit UmaskGuard(mode_t mask) : old_(::umask(mask)) {}
  ~UmaskGuard() { ::umask(old_); }

 private:
  mode_t old_;
};

mode_t mode_of(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST_F(CacheFilesTest, EntriesAndLocksFollowTheUmask) {
  FakeCompiler fake;
  for (const mode_t mask : {mode_t{022}, mode_t{027}, mode_t{002}, mode_t{077}}) {
    UmaskGuard umask(mask);
    const std::string dir = dir_ + "/umask" + std::to_string(mask);
    Cache cache(dir, false, false);
    Cache::Result result;
    cache.get_or_compile(test_request(), fake, &result);
    ASSERT_FALSE(result.entry_dir.empty()) << result.note;
    EXPECT_EQ(mode_of(result.entry_dir), 0777 & ~mask) << "umask " << mask;
    for (const char* file : {"meta.json", "kernel.cubin", "kernel.cu"})
      EXPECT_EQ(mode_of(result.entry_dir + "/" + file), 0666 & ~mask) << file << ", umask " << mask;
    EXPECT_EQ(mode_of(dir + "/locks/" + result.key.hex + ".lock"), 0666 & ~mask) << mask;
  }
}

// Holds on to whether the key's lock was held (by the cache) while it compiled.
class LockProbingCompiler : public FakeCompiler {
 public:
  CompiledKernel compile(const CompileRequest& r) const override {
    const int fd = ::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC);
    lock_was_held = fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    if (fd >= 0) ::close(fd);
    return FakeCompiler::compile(r);
  }
  std::string lock_path;
  mutable bool lock_was_held = false;
};

TEST_F(CacheFilesTest, ALockFileThisUserCannotWriteStillLocks) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes any file; run as another user";
  LockProbingCompiler probe;
  Cache cache(dir_, false, false);
  probe.lock_path = dir_ + "/locks/" + cache.key(test_request(), probe).hex + ".lock";
  fs::create_directories(dir_ + "/locks");
  // As if another user had created it with umask 022.
  std::ofstream(probe.lock_path).put('\n');
  fs::permissions(probe.lock_path, fs::perms::owner_read | fs::perms::group_read |
                                       fs::perms::others_read);
  cache.get_or_compile(test_request(), probe);
  EXPECT_TRUE(probe.lock_was_held);
}

TEST(NvccKey, EnvironmentFlagsArePartOfTheKey) {
  const auto nvcc = require_compiler(HM_COMPILER_NVCC);
  EnvGuard no_prepend("NVCC_PREPEND_FLAGS", nullptr);
  EnvGuard no_append("NVCC_APPEND_FLAGS", nullptr);
  Cache cache("/nonexistent/hm-key-only", false, false);  // key() touches no file
  const CacheKey plain = cache.key(selftest_request("sm_90a"), *nvcc);
  EXPECT_EQ(plain.components.at("compiler"), nvcc->id());
  {
    EnvGuard append("NVCC_APPEND_FLAGS", "-G");
    const CacheKey with = cache.key(selftest_request("sm_90a"), *nvcc);
    EXPECT_NE(with.hex, plain.hex);
    EXPECT_NE(with.components.at("compiler").find("NVCC_APPEND_FLAGS='-G'"), std::string::npos)
        << with.components.at("compiler");
  }
  {
    EnvGuard prepend("NVCC_PREPEND_FLAGS", "-lineinfo");
    const CacheKey with = cache.key(selftest_request("sm_90a"), *nvcc);
    EXPECT_NE(with.hex, plain.hex);
    EXPECT_NE(with.components.at("compiler").find("NVCC_PREPEND_FLAGS='-lineinfo'"),
              std::string::npos)
        << with.components.at("compiler");
  }
  EnvGuard empty("NVCC_APPEND_FLAGS", "");  // empty adds nothing to nvcc's command line
  EXPECT_EQ(cache.key(selftest_request("sm_90a"), *nvcc).hex, plain.hex);
}

TEST_F(CacheFilesTest, ImageOfTheWrongSizeIsRefusedUnread) {
  FakeCompiler fake;
  Cache cache(dir_, false, false);
  Cache::Result result;
  cache.get_or_compile(test_request(), fake, &result);
  // A sparse file of 1 TiB in place of the image: reading it whole first, as before, fails to
  // allocate (or takes forever); its size alone says it is not the recorded image.
  const std::string image = result.entry_dir + "/kernel.cubin";
  ASSERT_EQ(::truncate(image.c_str(), off_t{1} << 40), 0) << std::strerror(errno);
  try {
    Cache(dir_, /*jit_disabled=*/true, false).get_or_compile(test_request(), fake);
    ADD_FAILURE() << "a corrupt entry was loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), HM_ERROR_CACHE_CORRUPT) << e.message();
    EXPECT_NE(e.message().find("1099511627776 bytes, meta.json says"), std::string::npos)
        << e.message();
  }

  std::string bytes = "untouched", error;
  uint64_t found = 0;
  EXPECT_FALSE(try_read_file(image, &bytes, &error, 5, &found));
  EXPECT_EQ(found, uint64_t{1} << 40);
  EXPECT_EQ(bytes, "untouched");
  EXPECT_NE(error.find("expected 5"), std::string::npos) << error;
}

TEST_F(CacheFilesTest, OnlyTheEntryFoundCorruptIsDiscarded) {
  FakeCompiler fake;
  Cache cache(dir_, false, false);
  Cache::Result result;
  cache.get_or_compile(test_request(), fake, &result);
  const std::string entry = result.entry_dir, tmp = dir_ + "/tmp";

  // A repairer without the lock identifies a corrupt entry; meanwhile another process moves it
  // aside and publishes a valid one. The first must not throw the valid one away.
  std::ofstream(entry + "/meta.json", std::ios::trunc) << "garbage";
  core::FileId corrupt;
  ASSERT_TRUE(entry_identity(entry, &corrupt));
  fs::rename(entry, root_ + "/moved-aside");
  cache.get_or_compile(test_request(), fake);  // republishes a valid entry
  EXPECT_FALSE(discard_entry(entry, corrupt, tmp));
  Cache::Result reread;
  Cache(dir_, /*jit_disabled=*/true, false).get_or_compile(test_request(), fake, &reread);
  EXPECT_EQ(reread.outcome, Cache::Outcome::kHit);

  // The entry it did find is discarded.
  core::FileId current;
  ASSERT_TRUE(entry_identity(entry, &current));
  EXPECT_TRUE(discard_entry(entry, current, tmp));
  EXPECT_FALSE(fs::exists(entry));
}

TEST_F(CacheFilesTest, StaleNvccScratchDirectoriesArePruned) {
  const std::string tmp = root_ + "/tmpdir";
  fs::create_directories(tmp);
  EnvGuard tmpdir("TMPDIR", tmp.c_str());
  const auto two_hours_ago = fs::file_time_type::clock::now() - std::chrono::hours(2);
  for (const char* name : {"humming-nvcc-stale1", "humming-nvcc-fresh1", "other-stale"}) {
    fs::create_directories(tmp + "/" + name + "/humming");
    std::ofstream(tmp + "/" + name + "/k.cu") << "// left by a killed process";
  }
  fs::last_write_time(tmp + "/humming-nvcc-stale1", two_hours_ago);
  fs::last_write_time(tmp + "/other-stale", two_hours_ago);
  require_compiler(HM_COMPILER_NVCC);
  EXPECT_FALSE(fs::exists(tmp + "/humming-nvcc-stale1"));
  EXPECT_TRUE(fs::exists(tmp + "/humming-nvcc-fresh1"));  // may belong to a running compile
  EXPECT_TRUE(fs::exists(tmp + "/other-stale"));          // not ours
}

// `humming compile` with a cache directory that cannot be created (its parent is a file, which
// stops root too): every kernel compiles, none is saved, and the command says so and fails.
TEST_F(CacheFilesTest, CompileCommandFailsWhenNothingWasSaved) {
  fs::create_directories(root_);
  std::ofstream(root_ + "/a-file") << "not a directory";
  const std::string out = root_ + "/out.txt", err = root_ + "/err.txt";
  const std::string command = "env -u HUMMING_DISABLE_JIT HUMMING_CACHE_DIR=" + root_ +
                              "/a-file/cache " + HM_CLI_PATH + " compile --arch sm_90a >" + out +
                              " 2>" + err;
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << command;
  EXPECT_EQ(WEXITSTATUS(status), 1) << command;
  std::ifstream e(err);
  const std::string text((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("cannot be loaded back from the kernel cache"), std::string::npos) << text;
  for (const char* name : {"reference_gemm_f16_f16", "reference_gemm_bf16_f32",
                           "reference_gemm_f32_f32"})
    EXPECT_NE(text.find(std::string(name) + ": ERROR_JIT_DISABLED: no entry"), std::string::npos)
        << text;
  std::ifstream o(out);
  const std::string printed((std::istreambuf_iterator<char>(o)), std::istreambuf_iterator<char>());
  EXPECT_EQ(printed.find("kernels ready"), std::string::npos) << printed;
}

}  // namespace
}  // namespace hm::jit::test
