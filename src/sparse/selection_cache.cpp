#include "kvsketch/selection_cache.hpp"

#include <omp.h>

#include <algorithm>

#include "core/require.hpp"
#include "sparse/selection_support.hpp"

namespace kvsketch {

SelectionCache::SelectionCache(size_t layers, size_t kv_heads, size_t head_dim, const KVPolicy& policy,
                               const std::string& selector, std::set<size_t> dense_layers, uint64_t seed)
    : cache_(with_rows_for_selection([&] { return KVCache(layers, kv_heads, head_dim, policy, seed); })),
      dense_layers_(std::move(dense_layers)),
      heads_(layers * kv_heads) {
  for (const size_t layer : dense_layers_)
    require(layer < layers, "selection cache: dense layer {} is out of range; the cache has {} layers", layer, layers);
  // One selector, cloned per layer and head: MagicPIG's projection is shared, as in the paper.
  const auto prototype = make_selector(selector, head_dim, seed);
  for (size_t layer = 0; layer < layers; ++layer)
    if (!dense(layer))
      for (size_t h = 0; h < kv_heads; ++h) {
        BodyView::of(cache_, layer, h);  // refuses codecs whose rows the selection cannot read one by one
        at(layer, h).selector = prototype->clone();
      }
}

void SelectionCache::append(size_t layer, const float* keys, const float* values, size_t tokens) {
  const size_t kv_heads = cache_.kv_heads(), d = cache_.head_dim();
  require(layer < cache_.layers(), "append: layer {} is out of range; the cache has {} layers", layer, cache_.layers());
  std::vector<size_t> sinks_before(kv_heads), body_before(kv_heads);
  for (size_t h = 0; h < kv_heads; ++h) {
    sinks_before[h] = cache_.head(layer, h).sink_count;
    body_before[h] = cache_.head(layer, h).body_count();
  }
  cache_.append(layer, keys, values, tokens);  // checks everything; nothing below can be refused
  if (dense(layer)) return;
  const size_t block = cache_.policy().block;
  for (size_t h = 0; h < kv_heads; ++h) {
    HeadSelector& head = at(layer, h);
    const size_t to_sinks = cache_.head(layer, h).sink_count - sinks_before[h];
    append_as_held(head.pending_keys, keys + (h * tokens + to_sinks) * d, (tokens - to_sinks) * d);
    append_as_held(head.pending_values, values + (h * tokens + to_sinks) * d, (tokens - to_sinks) * d);
    const size_t entered = cache_.head(layer, h).body_count() - body_before[h];
    feed_pending(*head.selector, head.pending_keys, head.pending_values, entered, block, d);
  }
}

AttentionResult SelectionCache::attention(size_t layer, const float* queries, size_t q_heads, uint64_t draw) const {
  if (dense(layer)) return decode_attention_layer(cache_, layer, queries, q_heads);
  const size_t kv_heads = cache_.kv_heads(), d = cache_.head_dim();
  require(layer < cache_.layers(), "attention: layer {} is out of range; the cache has {} layers", layer,
          cache_.layers());
  require(queries != nullptr && q_heads > 0 && q_heads % kv_heads == 0,
          "attention: {} query heads is not a positive multiple of the {} kv heads", q_heads, kv_heads);
  require_finite_rows(queries, q_heads, d, "attention (queries)");
  const size_t group = q_heads / kv_heads;
  std::vector<AttentionResult> heads(q_heads);
  // Query heads are independent and selectors answer concurrently: the same bits on any thread count.
#pragma omp parallel for schedule(dynamic, 1) if (q_heads > 1)
  for (long q = 0; q < static_cast<long>(q_heads); ++q) {
    const size_t kv = static_cast<size_t>(q) / group;
    const HeadCache& head = cache_.head(layer, kv);
    const float* query = queries + static_cast<size_t>(q) * d;
    const BodyView body = BodyView::of(cache_, layer, kv);
    const uint64_t step = (draw * cache_.layers() + layer) * kv_heads + kv;  // a distinct draw per layer and head
    AttentionResult out = weighted_attention(query, body, at(layer, kv).selector->select(query, body, step));
    merge_attention(out, dense_attention(query, BodyView::half(head.sink_keys.data(), head.sink_values.data(),
                                                               head.sink_count, d)));
    merge_attention(out, dense_attention(query, BodyView::half(head.window_keys.data(), head.window_values.data(),
                                                               head.window_count, d)));
    heads[static_cast<size_t>(q)] = std::move(out);
  }
  return concat_attention(heads);
}

const TokenSelector& SelectionCache::selector(size_t layer, size_t kv_head) const {
  require(layer < cache_.layers() && kv_head < cache_.kv_heads(), "selector: layer {} head {} is out of range", layer,
          kv_head);
  require(!dense(layer), "selector: layer {} is dense (attended in full, no selector)", layer);
  return *at(layer, kv_head).selector;
}

size_t SelectionCache::index_bytes() const {
  size_t total = 0;
  for (const HeadSelector& head : heads_)
    if (head.selector) total += head.selector->index_bytes();
  return total;
}

}  // namespace kvsketch
