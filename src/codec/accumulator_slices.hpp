// Composite codecs (ChannelSplit, CenteredCodec) give an inner codec a slice of each head's
// accumulator: heads x total floats, the slice [offset, offset + width) of each head. The inner
// multi-query functions want their slices contiguous (heads x width), so they work on a copy in
// kernel memory (decode calls this for every block of every step; a warm call allocates nothing).
#pragma once
#include <algorithm>
#include <cstddef>
#include <vector>

#include "core/kernel_memory.hpp"

namespace kvsketch {

template <typename Work>
void with_accumulator_slices(float* accumulators, size_t heads, size_t total, size_t offset, size_t width, Work work) {
  KernelVector<float> slices(heads * width);
  for (size_t h = 0; h < heads; ++h)
    std::copy_n(accumulators + h * total + offset, width, slices.data() + h * width);
  work(slices.data());
  for (size_t h = 0; h < heads; ++h)
    std::copy_n(slices.data() + h * width, width, accumulators + h * total + offset);
}

}  // namespace kvsketch
