// Processes racing on one cache key. With the per-key lock the kernel is compiled once; without
// it (the lock is advisory and may be unavailable) both compile, one publish wins the rename,
// and the loser discards its copy and uses the winner's: either way every process ends with the
// same valid entry.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "test_cache_support.hpp"

namespace hm::jit::test {
namespace {

namespace fs = std::filesystem;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A compiler that is slow, counts its compiles across processes (one byte appended to a file
// per compile), and optionally waits until `rendezvous` compiles are running, which forces the
// unlocked race to happen rather than hoping the scheduler produces it.
class SlowCompiler : public FakeCompiler {
 public:
  SlowCompiler(std::string counter, int rendezvous)
      : counter_(std::move(counter)), rendezvous_(rendezvous) {
    per_process_image = true;
  }
  CompiledKernel compile(const CompileRequest& r) const override {
    const int fd = ::open(counter_.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd >= 0) {
      (void)!::write(fd, "c", 1);
      ::close(fd);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (rendezvous_ > 1 && count(counter_) < rendezvous_ &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return FakeCompiler::compile(r);
  }
  static int count(const std::string& counter) {
    struct stat st;
    return ::stat(counter.c_str(), &st) == 0 ? static_cast<int>(st.st_size) : 0;
  }

 private:
  std::string counter_;
  int rendezvous_;
};

// Forks `n` children that all start `body` at the same moment (when the gate pipe closes) and
// returns their exit codes. Children never return into gtest.
std::vector<int> run_children(int n, const std::function<int(int)>& body) {
  int gate[2];
  EXPECT_EQ(::pipe(gate), 0);
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(gate[1]);
      char c;
      while (::read(gate[0], &c, 1) < 0) {
      }
      int rc = 99;
      try {
        rc = body(i);
      } catch (...) {
        rc = 98;
      }
      ::_exit(rc);
    }
    pids.push_back(pid);
  }
  ::close(gate[0]);
  ::close(gate[1]);  // releases every child at once
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  return codes;
}

class CacheRaceTest : public CacheTest {
 protected:
  // Each child writes what it got: the image, the outcome and the note.
  std::vector<int> race(bool locking, int rendezvous) {
    counter_ = root_ + "/compiles";
    return run_children(2, [&](int i) {
      SlowCompiler compiler(counter_, rendezvous);
      Cache cache(dir_, false, false);
      cache.set_locking(locking);
      Cache::Result r;
      const CompiledKernel k = cache.get_or_compile(test_request(), compiler, &r);
      std::ofstream(result_path(i, "image"), std::ios::binary) << k.image;
      std::ofstream(result_path(i, "outcome")) << static_cast<int>(r.outcome);
      std::ofstream(result_path(i, "note")) << r.note;
      return 0;
    });
  }
  std::string result_path(int child, const char* what) const {
    return root_ + "/child" + std::to_string(child) + "." + what;
  }
  // The entry as a fresh process would load it.
  std::string published_image() {
    FakeCompiler must_not_compile;
    Cache cache(dir_, /*jit_disabled=*/true, false);
    return cache.get_or_compile(test_request(), must_not_compile).image;
  }
  std::string counter_;
};

TEST_F(CacheRaceTest, LockedRaceCompilesOnce) {
  const std::vector<int> codes = race(/*locking=*/true, /*rendezvous=*/1);
  ASSERT_EQ(codes, (std::vector<int>{0, 0}));
  EXPECT_EQ(SlowCompiler::count(counter_), 1) << "the lock must prevent the duplicate compile";
  const std::string image = published_image();
  EXPECT_EQ(read_text(result_path(0, "image")), image);
  EXPECT_EQ(read_text(result_path(1, "image")), image);
  const std::string outcomes =
      read_text(result_path(0, "outcome")) + read_text(result_path(1, "outcome"));
  EXPECT_TRUE(outcomes == "01" || outcomes == "10") << "one hit and one compile, got " << outcomes;
  EXPECT_TRUE(fs::is_empty(dir_ + "/tmp"));
  EXPECT_EQ(Cache(dir_, false, false).stats().entries, 1u);
}

TEST_F(CacheRaceTest, UnlockedRaceEndsWithOneValidEntry) {
  const std::vector<int> codes = race(/*locking=*/false, /*rendezvous=*/2);
  ASSERT_EQ(codes, (std::vector<int>{0, 0}));
  EXPECT_EQ(SlowCompiler::count(counter_), 2) << "without the lock both processes compile";
  // The images embed the compiling pid, so equal images prove the loser took the winner's copy.
  const std::string image = published_image();
  EXPECT_EQ(read_text(result_path(0, "image")), image);
  EXPECT_EQ(read_text(result_path(1, "image")), image);
  const std::string notes =
      read_text(result_path(0, "note")) + "|" + read_text(result_path(1, "note"));
  EXPECT_NE(notes.find("another process published this entry first"), std::string::npos) << notes;
  EXPECT_TRUE(fs::is_empty(dir_ + "/tmp")) << "the loser must delete its scratch copy";
  EXPECT_EQ(Cache(dir_, false, false).stats().entries, 1u);
}

// Threads of one process take the same flock (each open() is its own lock description).
TEST_F(CacheRaceTest, ThreadsShareTheLock) {
  counter_ = root_ + "/compiles";
  SlowCompiler compiler(counter_, 1);
  Cache cache(dir_, false, false);
  std::vector<std::string> images(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back(
        [&, i] { images[i] = cache.get_or_compile(test_request(), compiler).image; });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(compiler.compiles, 1);
  for (const std::string& image : images) EXPECT_EQ(image, images[0]);
}

}  // namespace
}  // namespace hm::jit::test
