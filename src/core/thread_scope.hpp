// ThreadScope: OpenMP's thread count set for the scope of a call (0 keeps the current one), and
// restored after it, so that an index's `threads` option does not leak into the caller's code.
#pragma once
#include <omp.h>

namespace kvsketch {

class ThreadScope {
 public:
  explicit ThreadScope(int threads) : before_(omp_get_max_threads()) {
    if (threads > 0) omp_set_num_threads(threads);
  }
  ~ThreadScope() { omp_set_num_threads(before_); }
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  int before_;
};

}  // namespace kvsketch
