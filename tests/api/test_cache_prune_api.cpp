// hm_cache_prune and `humming cache prune`: the kernel cache trimmed by last use and by size.
// Entries are laid out by hand (v1/<arch>/<hh>/<key>/meta.json + an image): pruning reads only
// their times and sizes.
#include <gtest/gtest.h>

#include <sys/file.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "humming.h"

namespace fs = std::filesystem;

namespace {

std::string last_error() {
  char buf[1024];
  hm_last_error_message(buf, sizeof buf);
  return buf;
}

class CachePrune : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hm_prune_" + std::to_string(::getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // An entry last used `days_ago` days ago, with an image of `bytes` bytes.
  fs::path entry(const std::string& hex, double days_ago, size_t bytes) {
    const fs::path e = dir_ / "v1" / "sm_90a" / hex.substr(0, 2) / hex;
    fs::create_directories(e);
    std::ofstream(e / "kernel.cubin") << std::string(bytes, 'x');
    std::ofstream(e / "meta.json") << "{}";
    const auto when = fs::file_time_type::clock::now() -
                      std::chrono::duration_cast<fs::file_time_type::duration>(
                          std::chrono::duration<double>(days_ago * 86400));
    fs::last_write_time(e / "meta.json", when);
    return e;
  }

  fs::path dir_;
};

TEST_F(CachePrune, ByAgeThenBySizeOldestFirst) {
  const fs::path old_entry = entry("aa01", 10, 4000);
  const fs::path middle = entry("bb02", 2, 4000);
  const fs::path fresh = entry("cc03", 0, 4000);
  fs::create_directories(dir_ / "locks");
  std::ofstream(dir_ / "locks" / "aa01.lock");
  std::ofstream(dir_ / "locks" / "cc03.lock");

  uint64_t entries = 99, bytes = 99;
  ASSERT_EQ(hm_cache_prune(dir_.c_str(), 5 * 86400, UINT64_MAX, &entries, &bytes), HM_SUCCESS)
      << last_error();
  EXPECT_EQ(entries, 1u);
  EXPECT_EQ(bytes, 4002u);  // the image and meta.json
  EXPECT_FALSE(fs::exists(old_entry));
  EXPECT_TRUE(fs::exists(middle));
  EXPECT_TRUE(fs::exists(fresh));
  EXPECT_FALSE(fs::exists(dir_ / "locks" / "aa01.lock")) << "the pruned entry's lock stays";
  EXPECT_TRUE(fs::exists(dir_ / "locks" / "cc03.lock"));

  // Down to about one entry's size: the least recently used goes, the newest stays.
  ASSERT_EQ(hm_cache_prune(dir_.c_str(), 0, 6000, &entries, nullptr), HM_SUCCESS) << last_error();
  EXPECT_EQ(entries, 1u);
  EXPECT_FALSE(fs::exists(middle));
  EXPECT_TRUE(fs::exists(fresh));

  // No limits: nothing goes.
  ASSERT_EQ(hm_cache_prune(dir_.c_str(), 0, UINT64_MAX, &entries, &bytes), HM_SUCCESS);
  EXPECT_EQ(entries, 0u);
  EXPECT_TRUE(fs::exists(fresh));
}

// An entry whose key lock another process holds (it is compiling that kernel) is left alone.
TEST_F(CachePrune, AnEntryBeingCompiledIsLeftAlone) {
  const fs::path busy = entry("dd04", 30, 100);
  fs::create_directories(dir_ / "locks");
  const int fd = ::open((dir_ / "locks" / "dd04.lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);  // another open file description: excludes this process too
  uint64_t entries = 99;
  ASSERT_EQ(hm_cache_prune(dir_.c_str(), 86400, UINT64_MAX, &entries, nullptr), HM_SUCCESS)
      << last_error();
  EXPECT_EQ(entries, 0u);
  EXPECT_TRUE(fs::exists(busy));
  ::close(fd);
  ASSERT_EQ(hm_cache_prune(dir_.c_str(), 86400, UINT64_MAX, &entries, nullptr), HM_SUCCESS);
  EXPECT_EQ(entries, 1u);
}

TEST_F(CachePrune, NoCacheIsNothingToPruneAndAFileIsAnError) {
  uint64_t entries = 99;
  EXPECT_EQ(hm_cache_prune((dir_ / "never_made").c_str(), 1, 1, &entries, nullptr), HM_SUCCESS)
      << last_error();
  EXPECT_EQ(entries, 0u);
  std::ofstream(dir_ / "a_file") << "x";
  EXPECT_EQ(hm_cache_prune((dir_ / "a_file").c_str(), 1, 1, nullptr, nullptr), HM_ERROR_IO);
  EXPECT_NE(last_error().find("is not a directory"), std::string::npos) << last_error();
}

TEST_F(CachePrune, CommandLine) {
  entry("ee05", 40, 10);
  entry("ff06", 0, 10);
  const std::string cli = HM_CLI_PATH;
  const std::string out = (dir_ / "out.txt").string();
  EXPECT_NE(std::system((cli + " cache prune --dir " + dir_.string() + " > " + out + " 2>&1").c_str()), 0)
      << "no limit given: refused";
  EXPECT_EQ(std::system((cli + " cache prune --dir " + dir_.string() + " --max-age-days 30 > " +
                         out + " 2>&1").c_str()),
            0);
  std::ifstream in(out);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("removed 1 entries"), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(dir_ / "v1" / "sm_90a" / "ee" / "ee05"));
  EXPECT_TRUE(fs::exists(dir_ / "v1" / "sm_90a" / "ff" / "ff06"));
}

}  // namespace
