// PagedKVCache::read (paged_cache.hpp): a sequence's rows as floats, in token order.
#include <algorithm>
#include <vector>

#include "cache/half_rows.hpp"
#include "cache/paged_cache_state.hpp"
#include "core/require.hpp"

namespace kvsketch {

void PagedKVCache::read(SequenceId id, size_t layer, size_t first, size_t count, float* keys, float* values) const {
  state_->check_layer(layer, "read");
  const SequenceLayer& rows = state_->sequence(id, "read").layers[layer];
  const size_t tokens = rows.tokens(), d = head_dim(), heads = kv_heads();
  require(first <= tokens && count <= tokens - first,
          "read: tokens [{}, {}) out of range; sequence {} holds {} tokens in layer {}", first, first + count, id,
          tokens, layer);
  if (count == 0) return;
  require(keys != nullptr && values != nullptr, "read: keys and values must not be null");
  const size_t end = first + count;
  std::vector<float> page_keys, page_values;
  for (size_t g = 0; g < heads; ++g) {
    const HeadRows& head = rows.heads[g];
    float* k = keys + g * count * d;
    float* v = values + g * count * d;
    // Token t of this head lands at row t - first of the output; each part copies its overlap.
    const auto overlap = [&](size_t part_first, size_t part_tokens) {
      return std::pair{std::max(first, part_first), std::min(end, part_first + part_tokens)};
    };
    if (auto [a, b] = overlap(0, head.sinks); a < b) {
      halves_to_floats(head.sink_keys.data() + a * d, (b - a) * d, k + (a - first) * d);
      halves_to_floats(head.sink_values.data() + a * d, (b - a) * d, v + (a - first) * d);
    }
    // Pages decode whole (their rows are whole row groups), then the overlap is copied.
    size_t page_first = head.sinks;
    for (const auto& page : rows.pages) {
      const size_t page_rows = page->rows();
      if (auto [a, b] = overlap(page_first, page_rows); a < b) {
        page_keys.resize(page_rows * d);
        page_values.resize(page_rows * d);
        key_codec(layer, g).decode(page->keys[g], 0, page_rows, page_keys.data());
        value_codec(layer, g).decode(page->values[g], 0, page_rows, page_values.data());
        std::copy_n(page_keys.data() + (a - page_first) * d, (b - a) * d, k + (a - first) * d);
        std::copy_n(page_values.data() + (a - page_first) * d, (b - a) * d, v + (a - first) * d);
      }
      page_first += page_rows;
    }
    // The window's live tokens start after the `retained` encoded ones it keeps for truncate.
    const size_t window_first = head.sinks + rows.body;
    if (auto [a, b] = overlap(window_first, head.window); a < b) {
      const size_t row = head.retained + (a - window_first);
      halves_to_floats(head.window_keys.data() + row * d, (b - a) * d, k + (a - first) * d);
      halves_to_floats(head.window_values.data() + row * d, (b - a) * d, v + (a - first) * d);
    }
  }
}

}  // namespace kvsketch
