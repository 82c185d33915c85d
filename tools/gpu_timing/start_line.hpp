// A start line for threads that drive GPUs at the same time (bench_multi_gpu, the multi-device
// GPU tests): each thread sets up, then waits here until all have arrived, so their launches
// really overlap instead of the first thread finishing before the last one starts.
// Header-only; C++17 has no std::latch.
#pragma once

#include <condition_variable>
#include <mutex>

namespace gpu_timing {

// Releases every waiting thread once `count` have arrived. One use: a second start needs a new
// StartLine. A thread whose setup failed must still arrive, or the others wait for ever.
class StartLine {
 public:
  explicit StartLine(int count) : left_(count) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (--left_ == 0) cv_.notify_all();
    cv_.wait(lock, [&] { return left_ <= 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int left_;
};

}  // namespace gpu_timing
