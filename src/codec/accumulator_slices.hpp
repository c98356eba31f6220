// Composite codecs (ChannelSplit, CenteredCodec) give an inner codec a slice of each head's
// accumulator: heads x total floats, the slice [offset, offset + width) of each head. The inner
// multi-query functions want their slices contiguous (heads x width), so they work on a copy: on
// the stack up to 16 KiB (decode calls this for every block of every step, and a warm decode call
// allocates nothing), on the heap beyond.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <vector>

namespace kvsketch {

template <typename Work>
void with_accumulator_slices(float* accumulators, size_t heads, size_t total, size_t offset, size_t width, Work work) {
  std::array<float, 4096> on_stack;
  std::vector<float> on_heap(heads * width > on_stack.size() ? heads * width : 0);
  float* slices = on_heap.empty() ? on_stack.data() : on_heap.data();
  for (size_t h = 0; h < heads; ++h) std::copy_n(accumulators + h * total + offset, width, slices + h * width);
  work(slices);
  for (size_t h = 0; h < heads; ++h) std::copy_n(slices + h * width, width, accumulators + h * total + offset);
}

}  // namespace kvsketch
