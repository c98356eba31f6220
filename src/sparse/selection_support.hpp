// What the selection caches (SelectionCache, PagedSelectionCache) share: the rows they feed their
// selectors, which are what the cache holds (fp16), widened back to float, so that a selector
// indexes the keys the attention reads, fed a policy block at a time; and the row packing they store.
#pragma once
#include <algorithm>
#include <cstddef>
#include <optional>
#include <vector>

#include "cache/row_packing.hpp"
#include "kvsketch/half.hpp"
#include "kvsketch/kv_policy.hpp"
#include "kvsketch/sparse_attention.hpp"

namespace kvsketch {

// Appends `count` floats from `rows`, each rounded through fp16.
inline void append_as_held(std::vector<float>& into, const float* rows, size_t count) {
  for (size_t i = 0; i < count; ++i) into.push_back(half_to_float(float_to_half(rows[i])));
}

// Feeds a selector the first `tokens` pending rows (dim floats each) in appends of at most `block`
// rows, as the cache encodes them, and drops them from the pending rows: a token-by-token stream
// and one long prefill build the same index.
inline void feed_pending(TokenSelector& selector, std::vector<float>& keys, std::vector<float>& values,
                         size_t tokens, size_t block, size_t dim) {
  for (size_t done = 0; done < tokens; done += block)
    selector.append(keys.data() + done * dim, values.data() + done * dim, std::min(block, tokens - done));
  const auto fed = static_cast<std::ptrdiff_t>(tokens * dim);
  keys.erase(keys.begin(), keys.begin() + fed);
  values.erase(values.begin(), values.begin() + fed);
}

// make() (which builds the selection's cache) with the automatic row packing taken as plain: the
// selection reads scattered rows, which rows in quads would have to copy out chunk by chunk, at
// about twice the time. A packing set explicitly (KVSKETCH_PACKING, a ScopedRowPacking) stays.
template <class Make>
auto with_rows_for_selection(Make&& make) {
  std::optional<ScopedRowPacking> plain;
  if (current_row_packing() == RowPacking::kAuto) plain.emplace(RowPacking::kPlain);
  return make();
}

}  // namespace kvsketch
