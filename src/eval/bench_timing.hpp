// Timing helpers shared by the benchmark drivers (bench attention, bench sparse).
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

#include "kvsketch/attention_bench.hpp"

namespace kvsketch::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

inline double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}

// Copies of `copy_bytes` each so that they add up to at least twice the last-level cache: querying
// them in turn reads from memory, as a decoder going through its layers does.
inline size_t copies_beyond_cache(size_t copy_bytes) {
  const size_t wanted = 2 * last_level_cache_bytes();
  return std::clamp<size_t>((wanted + copy_bytes - 1) / std::max<size_t>(copy_bytes, 1), 1, 4096);
}

// Median over `repetitions` passes of the mean time in ns per copy of step(copy, pass), after one
// untimed pass (page-in, thread pool) with pass 0.
template <typename Step>
double median_ns_per_copy(size_t copies, int repetitions, const Step& step) {
  for (size_t c = 0; c < copies; ++c) step(c, 0);
  std::vector<double> times;
  for (int r = 0; r < std::max(repetitions, 1); ++r) {
    const auto start = Clock::now();
    for (size_t c = 0; c < copies; ++c) step(c, static_cast<size_t>(r));
    times.push_back(seconds_since(start) * 1e9 / static_cast<double>(copies));
  }
  return median(times);
}

}  // namespace kvsketch::bench
