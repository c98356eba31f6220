// Timing helpers shared by the benchmark drivers (bench attention, bench sparse).
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

#include "kvsketch/eval/attention_bench.hpp"

namespace kvsketch::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

inline double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}

// (q3 - q1) / median of x: 0 for a steady series.
inline double relative_spread(std::vector<double> x) {
  if (x.size() < 2) return 0.0;
  std::sort(x.begin(), x.end());
  const double mid = x[x.size() / 2];
  const double q1 = x[x.size() / 4], q3 = x[(3 * x.size()) / 4 < x.size() ? (3 * x.size()) / 4 : x.size() - 1];
  return mid > 0.0 ? (q3 - q1) / mid : 0.0;
}

// The process's peak resident memory so far.
size_t peak_memory_bytes();

// The bytes that, queried in turn, are read from memory: twice the last-level cache, but at most
// 256 MiB (VMs report host caches of 500 MiB and more, which would make every policy's copies a
// gigabyte).
inline size_t cold_bytes() { return std::min<size_t>(2 * last_level_cache_bytes(), size_t{256} << 20); }

// Copies of `copy_bytes` each so that they add up to at least cold_bytes(): querying them in turn
// reads from memory, as a decoder going through its layers does.
inline size_t copies_beyond_cache(size_t copy_bytes) {
  const size_t wanted = cold_bytes();
  return std::clamp<size_t>((wanted + copy_bytes - 1) / std::max<size_t>(copy_bytes, 1), 1, 4096);
}

// Times in ns per copy of copies.size() kinds of step, kind s over copies[s] copies, `repetitions`
// passes each, taken in turn: pass r runs step(0, copy, r) over every copy of kind 0, then kind 1,
// and so on, after one untimed pass of each with pass 0 (page-in, thread pool). A phase of the
// machine's speed (a VM's swings last seconds to minutes) then falls on every kind alike, and the
// ratio of two kinds' times in one pass compares them in the same phase. times[s][r].
template <typename Step>
std::vector<std::vector<double>> interleaved_ns_per_copy(const std::vector<size_t>& copies, int repetitions,
                                                         const Step& step) {
  const size_t steps = copies.size();
  for (size_t s = 0; s < steps; ++s)
    for (size_t c = 0; c < copies[s]; ++c) step(s, c, size_t{0});
  std::vector<std::vector<double>> times(steps);
  for (int r = 0; r < std::max(repetitions, 1); ++r)
    for (size_t s = 0; s < steps; ++s) {
      const auto start = Clock::now();
      for (size_t c = 0; c < copies[s]; ++c) step(s, c, static_cast<size_t>(r));
      times[s].push_back(seconds_since(start) * 1e9 / static_cast<double>(copies[s]));
    }
  return times;
}

// Median over `repetitions` passes of the mean time in ns per copy of step(copy, pass), after one
// untimed pass with pass 0: one kind of step timed alone.
template <typename Step>
double median_ns_per_copy(size_t copies, int repetitions, const Step& step) {
  return median(interleaved_ns_per_copy({copies}, repetitions,
                                        [&](size_t, size_t c, size_t pass) { step(c, pass); })[0]);
}

// The median over passes of a[r] / b[r]: a ratio of paired times, each pair from one phase.
inline double median_ratio(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> ratios;
  for (size_t r = 0; r < std::min(a.size(), b.size()); ++r) ratios.push_back(a[r] / b[r]);
  return ratios.empty() ? 0.0 : median(ratios);
}

}  // namespace kvsketch::bench
