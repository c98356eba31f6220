#pragma once

#include <omp.h>

#include <algorithm>
#include <cstddef>

#include "core/require.hpp"
#include "kvsketch/limits.hpp"

namespace kvsketch {

// Refuses a requested thread count outside 0..kMaxThreads (OpenMP crashes creating 100000).
inline void check_threads(int requested, const char* what) {
  require(requested >= 0 && requested <= kMaxThreads, "{}: threads must be in 0..{} (0: all), got {}", what,
          kMaxThreads, requested);
}

// Threads for a parallel loop of `items` tasks: the requested count (0: all), never more than the
// tasks. A thread with no task still costs its wake-up and the join: on a 16-core host, 16 threads
// over a 16k-token decode step's 5 tasks took longer than 2 threads (docs/RESULTS.md).
inline int team_size(int requested, size_t items) {
  const int threads = requested > 0 ? requested : omp_get_max_threads();
  return static_cast<int>(std::clamp<size_t>(items, 1, static_cast<size_t>(std::max(threads, 1))));
}

}  // namespace kvsketch
