// Splitting host work over threads: the converters, the quantizer and the packer share these,
// so a process out of threads, or a range that throws, is handled one way everywhere.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace hm::core {

// CPUs this process may run on (its affinity mask: a container or taskset may allow fewer than
// the machine has), at least 1.
int usable_cpus();

// Runs fn(begin, end) over [0, count) in `threads` contiguous ranges, the caller's thread taking
// the first. Every range runs, whatever another one does: a thread that cannot be started
// (std::system_error, the process is out of threads) leaves its range to the caller's thread,
// and an exception thrown by a range is kept; the first, in range order, is rethrown once all
// have finished (an exception escaping a std::thread would terminate the process).
template <class Fn>
void parallel_ranges(int64_t count, int64_t threads, Fn fn) {
  if (count <= 0) return;
  threads = std::clamp<int64_t>(threads, 1, count);
  if (threads == 1) {
    fn(int64_t{0}, count);
    return;
  }
  auto begin_of = [&](int64_t t) { return count * t / threads; };
  std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
  auto run = [&](int64_t t) {
    try {
      fn(begin_of(t), begin_of(t + 1));
    } catch (...) {
      errors[static_cast<size_t>(t)] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads - 1));
  int64_t started = 1;  // ranges 1 .. started - 1 have a thread
  for (; started < threads; ++started) {
    try {
      pool.emplace_back(run, started);
    } catch (const std::system_error&) {
      break;
    }
  }
  run(0);
  for (int64_t t = started; t < threads; ++t) run(t);
  for (std::thread& th : pool) th.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace hm::core
