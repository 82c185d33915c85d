// core::parallel_ranges, which the converters, the quantizer and the packer share.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/parallel.hpp"

namespace {

TEST(ParallelRanges, EveryIndexRunsOnceWhateverTheSplit) {
  for (int64_t count : {1, 2, 7, 64, 1000})
    for (int64_t threads : {-3, 0, 1, 2, 3, 8, 5000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(count));
      hm::core::parallel_ranges(count, threads, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (int64_t i = 0; i < count; ++i)
        ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1)
            << "count " << count << " threads " << threads << " index " << i;
    }
  int calls = 0;
  hm::core::parallel_ranges(0, 4, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

// A range that throws on a worker thread would end the process if the exception escaped the
// thread; it comes back on the caller's thread, the first in range order, after every range ran.
TEST(ParallelRanges, TheFirstExceptionInRangeOrderIsRethrownAfterEveryRangeRan) {
  std::atomic<int64_t> done{0};
  try {
    hm::core::parallel_ranges(8, 8, [&](int64_t begin, int64_t end) {
      done += end - begin;
      if (begin >= 3) throw std::runtime_error("range " + std::to_string(begin));
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "range 3");
  }
  EXPECT_EQ(done.load(), 8);
}

}  // namespace
