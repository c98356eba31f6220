// The benchmark drivers' statistics.
#include <gtest/gtest.h>

#include "eval/bench_timing.hpp"

namespace kvsketch {

TEST(BenchTiming, RelativeSpreadIsTheInterquartileRangeOverTheMedian) {
  EXPECT_EQ(bench::relative_spread({5.0}), 0.0);
  EXPECT_EQ(bench::relative_spread({2.0, 2.0, 2.0, 2.0}), 0.0);
  // Sorted 1..8: q1 = x[2] = 3, median = x[4] = 5, q3 = x[6] = 7.
  EXPECT_DOUBLE_EQ(bench::relative_spread({8, 1, 7, 2, 6, 3, 5, 4}), 4.0 / 5.0);
  // One slow pass of nine does not make a run unstable; three do.
  EXPECT_LT(bench::relative_spread({10, 10, 10, 10, 10, 10, 10, 10, 30}), kUnstableSpread);
  EXPECT_GT(bench::relative_spread({10, 10, 10, 10, 10, 10, 30, 30, 30}), kUnstableSpread);
  EXPECT_GT(bench::peak_memory_bytes(), size_t{1} << 20);
}

}  // namespace kvsketch
