#include "core/huge_pages.hpp"

#include <cstdint>
#include <fstream>
#include <limits>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace kvsketch {

void advise_huge_pages(void* data, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (bytes < 2 * kHuge) return;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // advice: failure is harmless
#else
  (void)data;
  (void)bytes;
#endif
}

size_t anon_huge_page_bytes(std::istream& smaps_rollup) {
  std::string key;
  size_t kib = 0;
  while (smaps_rollup >> key) {
    if (key == "AnonHugePages:") return smaps_rollup >> kib ? kib * 1024 : 0;
    smaps_rollup.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

size_t huge_page_bytes_in_use() {
  std::ifstream in("/proc/self/smaps_rollup");
  return anon_huge_page_bytes(in);
}

}  // namespace kvsketch
