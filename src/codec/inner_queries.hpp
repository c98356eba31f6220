// The inner codec's prepared queries of a wrapping codec's (rotate:, center:), as the array its
// multi-head kernels take. Decode calls this for every block of every step, so the array is kernel
// memory (src/core/kernel_memory.hpp): a warm call allocates nothing.
#pragma once
#include <cstddef>

#include "core/kernel_memory.hpp"
#include "kvsketch/codec.hpp"

namespace kvsketch {

template <typename OuterQuery>
KernelVector<const PreparedQuery*> inner_queries(const PreparedQuery* const* queries, size_t heads) {
  KernelVector<const PreparedQuery*> inner(heads);
  for (size_t h = 0; h < heads; ++h) inner[h] = static_cast<const OuterQuery&>(*queries[h]).inner.get();
  return inner;
}

}  // namespace kvsketch
