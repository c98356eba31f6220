// What the selection caches (SelectionCache, PagedSelectionCache) share: the rows they feed their
// selectors, which are what the cache holds (fp16), widened back to float, so that a selector
// indexes the keys the attention reads; and the row layout they store.
#pragma once
#include <cstddef>
#include <vector>

#include "kvsketch/half.hpp"
#include "kvsketch/kv_policy.hpp"

namespace kvsketch {

// Appends `count` floats from `rows`, each rounded through fp16.
inline void append_as_held(std::vector<float>& into, const float* rows, size_t count) {
  for (size_t i = 0; i < count; ++i) into.push_back(half_to_float(float_to_half(rows[i])));
}

// The policy with layout=auto taken as plain: the selection reads scattered rows, which rows in
// quads would have to copy out chunk by chunk, at about twice the time.
inline KVPolicy with_rows_for_selection(KVPolicy policy) {
  if (policy.layout == RowLayout::kAuto) policy.layout = RowLayout::kPlain;
  return policy;
}

}  // namespace kvsketch
