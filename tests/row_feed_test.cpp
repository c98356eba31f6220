// The row kernels' prefetch schedule (simd/row_feed.hpp), with the lines it asks for recorded: every
// line of the rows asked for once, in address order where rows are contiguous, never past the last
// row, and always `ahead` rows in front of the rows the kernel reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "simd/row_feed.hpp"

using namespace kvsketch;

namespace {

struct RecordedFetch {
  static inline std::vector<const uint8_t*> lines;
  static void Line(const void* p) { lines.push_back(static_cast<const uint8_t*>(p)); }
};
using RecordedFeed = simd::BasicRowFeed<RecordedFetch>;

// Runs a kernel's loop over the feed, checking before each call that the last byte of the `ahead`
// rows from the call's first row has been asked for.
void run_calls(RecordedFeed& feed, const simd::RowSource& src, size_t n, size_t ahead, size_t rows_per_call,
               size_t ticks_per_call) {
  for (size_t call = 0; call * rows_per_call < n; ++call) {
    const size_t needed = std::min(n, call * rows_per_call + ahead);
    const uint8_t* last_byte = src.row(needed - 1) + (src.readable ? src.readable : src.stride) - 1;
    const auto& lines = RecordedFetch::lines;
    const bool asked = std::any_of(lines.rbegin(), lines.rend(), [&](const uint8_t* p) {
      return p <= last_byte && last_byte < p + 64;
    });
    ASSERT_TRUE(asked) << "call " << call << " of " << n << " rows: row " << needed - 1 << " not asked for";
    for (size_t t = 0; t < ticks_per_call; ++t) feed.Tick();
  }
}

}  // namespace

TEST(RowFeed, ContiguousRowsGiveEveryLineOnceInAddressOrder) {
  // fp16 rows at d = 128 (four lines), 3-bit rows at d = 128 with fp16 norms (50 bytes, lines
  // straddle rows), and float rows at d = 96; scores' pace (4 rows in 16 ticks), the weighted
  // sum's (1 row in 8), and a pace faster than a line a tick.
  struct Case {
    size_t stride, n, rows_per_call, ticks_per_call;
  };
  for (const Case c : {Case{256, 1000, 4, 16}, Case{256, 1000, 1, 8}, Case{50, 777, 4, 16}, Case{50, 777, 1, 8},
                       Case{384, 301, 4, 2}, Case{256, 40, 4, 16}}) {
    SCOPED_TRACE(testing::Message() << "stride " << c.stride << ", " << c.n << " rows, " << c.rows_per_call
                                    << " rows in " << c.ticks_per_call << " ticks");
    std::vector<uint8_t> data(c.n * c.stride + 128);
    uint8_t* rows = data.data() + (96 - reinterpret_cast<uintptr_t>(data.data()) % 64);
    const simd::RowSource src{simd::RowFormat::kHalf, rows, c.stride, c.stride / 2};
    RecordedFetch::lines.clear();
    RecordedFeed feed(src, 64, c.n, c.rows_per_call, c.ticks_per_call);
    run_calls(feed, src, c.n, 64, c.rows_per_call, c.ticks_per_call);
    for (size_t extra = 0; extra < 1000; ++extra) feed.Tick();  // past the end: nothing more
    // From the line holding the first byte (the rows start 32 bytes into a line) to the one
    // holding the last.
    const uintptr_t first = reinterpret_cast<uintptr_t>(src.data) & ~uintptr_t{63};
    const uintptr_t end = reinterpret_cast<uintptr_t>(src.data) + c.n * c.stride;
    const size_t lines = (end - first + 63) / 64;
    ASSERT_EQ(RecordedFetch::lines.size(), lines);
    for (size_t k = 0; k < lines; ++k)
      ASSERT_EQ(reinterpret_cast<uintptr_t>(RecordedFetch::lines[k]), first + 64 * k) << "request " << k;
  }
}

TEST(RowFeed, ScatteredRowsAreAskedForWholeInTheirOrder) {
  const size_t n = 300, stride = 256, ahead = 64;
  std::vector<uint32_t> indices(n);
  for (size_t i = 0; i < n; ++i) indices[i] = static_cast<uint32_t>((i * 7919) % 1009);
  std::vector<uint8_t> data(1009 * stride);
  simd::RowSource src{simd::RowFormat::kHalf, data.data(), stride, 128};
  src.indices = indices.data();
  RecordedFetch::lines.clear();
  RecordedFeed feed(src, ahead, n, 4, 16);
  run_calls(feed, src, n, ahead, 4, 16);
  ASSERT_EQ(RecordedFetch::lines.size(), n * 4);
  for (size_t i = 0; i < n; ++i)
    for (size_t line = 0; line < 4; ++line)
      ASSERT_EQ(RecordedFetch::lines[4 * i + line], src.row(i) + 64 * line) << "row " << i << ", line " << line;
}

TEST(RowFeed, PartsOfWiderRowsAreAskedForTheirOwnBytes) {
  // A ChannelSplit part: 24 readable bytes of each 200-byte row; the rest belongs to another part.
  const size_t n = 150, stride = 200;
  std::vector<uint8_t> data(n * stride);
  simd::RowSource src{simd::RowFormat::kIndex, data.data(), stride, 64};
  src.bits = 3;
  src.readable = 24;
  RecordedFetch::lines.clear();
  RecordedFeed feed(src, 64, n, 1, 4);
  run_calls(feed, src, n, 64, 1, 4);
  ASSERT_EQ(RecordedFetch::lines.size(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(RecordedFetch::lines[i], src.row(i));
}

TEST(RowFeed, WithoutTicksOnlyTheFirstRows) {
  const size_t n = 500, stride = 256;
  std::vector<uint8_t> data(n * stride);
  const simd::RowSource src{simd::RowFormat::kHalf, data.data(), stride, 128};
  RecordedFetch::lines.clear();
  RecordedFeed feed(src, 64, n, 4, 0);
  for (int t = 0; t < 10000; ++t) feed.Tick();
  const uintptr_t first = reinterpret_cast<uintptr_t>(data.data()), end = first + 64 * stride;
  EXPECT_EQ(RecordedFetch::lines.size(), (end - (first & ~uintptr_t{63}) + 63) / 64);  // the lines of 64 rows
}
