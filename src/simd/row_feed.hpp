// The prefetch schedule of the row kernels: rows asked for into L2 a fixed distance ahead of
// their use, a little at every step of the kernel's loop rather than in bursts.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "simd/fetch.hpp"
#include "simd/row_kernels.hpp"

namespace kvsketch::simd {

// Rows [0, ahead) are asked for at once; rows [ahead, n) at the pace at which the kernel reads:
// a call of the kernel's loop reads `rows_per_call` rows in `ticks_per_call` Tick()s, and the
// feed keeps `ahead` rows in front of it. Contiguous rows are asked for line by line in address
// order: asking for a block's rows one line of each at a time (lines 0 of 64 rows, then lines 1,
// ...) made the fp16 weighted sum from memory much slower, and spreading the scores' fetch of four
// rows over their sixteen steps made them faster (docs/RESULTS.md, "Kernel design measurements").
// Scattered rows (a gather) are asked for a row at a time. `Fetch::Line(p)` asks for the line at p (a test records
// them).
template <class Fetch>
class BasicRowFeed {
 public:
  BasicRowFeed(const RowSource& src, size_t ahead, size_t n, size_t rows_per_call, size_t ticks_per_call)
      : src_(src), row_bytes_(src.readable ? src.readable : src.stride),
        contiguous_(src.indices == nullptr && src.stride < row_bytes_ + 64) {
    const size_t first = std::min(n, ahead);
    if (contiguous_) {  // addresses as integers: the first line may start before the rows
      const uintptr_t data = reinterpret_cast<uintptr_t>(src.data);
      next_ = data & ~uintptr_t{63};
      end_ = data + (n > 0 ? (n - 1) * src.stride + row_bytes_ : 0);
      for (const uintptr_t head = data + first * src.stride; next_ < head && next_ < end_; next_ += 64)
        Fetch::Line(reinterpret_cast<const void*>(next_));
    } else {
      for (size_t k = 0; k < first; ++k) FetchRow(k);
      row_ = first;
      rows_ = n;
    }
    // Units (lines, or scattered rows) read per tick: gain / cost. The feed asks for them at that
    // pace or a little faster (rounded to whole units every `period_` ticks, from the first tick on).
    const size_t gain = rows_per_call * src.stride, cost = ticks_per_call * (contiguous_ ? 64 : src.stride);
    if (gain == 0 || cost == 0 || first == n) return;  // nothing to feed
    if (gain >= cost) {
      period_ = 1;
      units_ = (gain + cost - 1) / cost;
    } else {
      period_ = cost / gain;
      units_ = 1;
    }
    countdown_ = 1;
  }

  // One step of the kernel's loop: asks for the units whose turn has come.
  __attribute__((always_inline)) void Tick() {
    if (--countdown_ != 0) return;
    countdown_ = period_;
    for (size_t k = 0; k < units_; ++k) {
      if (contiguous_) {
        if (next_ < end_) Fetch::Line(reinterpret_cast<const void*>(next_));
        next_ += 64;
      } else if (row_ < rows_) {
        FetchRow(row_++);
      }
    }
  }

 private:
  __attribute__((always_inline)) void FetchRow(size_t k) const {
    const uint8_t* row = src_.row(k);
    for (size_t offset = 0; offset < row_bytes_; offset += 64) Fetch::Line(row + offset);
  }

  const RowSource& src_;
  size_t row_bytes_;
  bool contiguous_;
  // countdown_ starts at 0 where there is nothing to feed: it counts down from 2^64 first.
  size_t period_ = 0, units_ = 0, countdown_ = 0;
  uintptr_t next_ = 0, end_ = 0;  // contiguous rows: the next line to ask for, and the end of the rows
  size_t row_ = 0, rows_ = 0;     // scattered rows: the next row to ask for
};

struct L2Fetch {
  __attribute__((always_inline)) static void Line(const void* p) { FetchLine(p); }
};
using RowFeed = BasicRowFeed<L2Fetch>;

}  // namespace kvsketch::simd
