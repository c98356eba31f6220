// Large arrays that an index fills once (codes of 100k+ vectors) fault in a 4 KiB page at a time;
// on virtual machines each fault costs microseconds. Asking for transparent huge pages on the
// whole 2 MiB pages inside such an array makes the first touch 512 times fewer faults. Advice
// only: where the kernel has no huge pages (or another OS) nothing changes, including the bits.
#pragma once
#include <cstddef>
#include <istream>
#include <vector>

namespace kvsketch {

// Advises huge pages on the 2 MiB-aligned part of [data, data + bytes); below 4 MiB does nothing.
void advise_huge_pages(void* data, size_t bytes);

// Bytes of this process's anonymous memory on transparent huge pages now (AnonHugePages of
// /proc/self/smaps_rollup; 0 where it cannot be read). The benchmarks report it: whether the rows
// sit on 2 MiB pages changes how fast they stream (TLB misses).
size_t huge_page_bytes_in_use();
// The AnonHugePages field of a smaps_rollup text, in bytes (0 without one).
size_t anon_huge_page_bytes(std::istream& smaps_rollup);

// reserve() that advises huge pages on a new large allocation before anything touches it.
template <class T, class Allocator>
void reserve_huge(std::vector<T, Allocator>& v, size_t count) {
  if (v.capacity() >= count) return;
  v.reserve(count);
  advise_huge_pages(v.data() + v.size(), (v.capacity() - v.size()) * sizeof(T));
}

}  // namespace kvsketch
