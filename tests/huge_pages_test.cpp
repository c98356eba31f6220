// The benchmarks' report of memory on transparent huge pages: the AnonHugePages field of
// /proc/self/smaps_rollup, read in bytes.
#include <gtest/gtest.h>

#include <sstream>

#include "core/huge_pages.hpp"

using namespace kvsketch;

TEST(HugePages, ReadsAnonHugePagesFromSmapsRollup) {
  std::istringstream rollup(
      "55d0a0000000-7ffd5fbff000 ---p 00000000 00:00 0                          [rollup]\n"
      "Rss:             3581524 kB\n"
      "Anonymous:       3571328 kB\n"
      "LazyFree:              0 kB\n"
      "AnonHugePages:   3538944 kB\n"
      "ShmemPmdMapped:        0 kB\n");
  EXPECT_EQ(anon_huge_page_bytes(rollup), size_t{3538944} * 1024);
  std::istringstream none("Rss:  1024 kB\nAnonymous:  512 kB\n");
  EXPECT_EQ(anon_huge_page_bytes(none), 0u);
  std::istringstream empty;
  EXPECT_EQ(anon_huge_page_bytes(empty), 0u);
}
