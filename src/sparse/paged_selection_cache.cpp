#include "kvsketch/paged_selection_cache.hpp"

#include <algorithm>
#include <exception>

#include "cache/paged_cache_state.hpp"
#include "codec/codec_base.hpp"
#include "core/require.hpp"
#include "sparse/selection_support.hpp"

namespace kvsketch {
namespace {

// One side (keys or values) of KV head g of a layer's pages, for BodyView::paged.
std::vector<const CodeBuffer*> head_pages(const SequenceLayer& rows, size_t g, bool keys) {
  std::vector<const CodeBuffer*> pages;
  pages.reserve(rows.pages.size());
  for (const auto& page : rows.pages) pages.push_back(keys ? &page->keys[g] : &page->values[g]);
  return pages;
}

}  // namespace

PagedSelectionCache::PagedSelectionCache(size_t layers, size_t kv_heads, size_t head_dim, const KVPolicy& policy,
                                         const std::string& selector, std::set<size_t> dense_layers, uint64_t seed)
    : cache_(with_rows_for_selection([&] { return PagedKVCache(layers, kv_heads, head_dim, policy, seed); })),
      dense_layers_(std::move(dense_layers)),
      prototype_(make_selector(selector, head_dim, seed)) {
  for (const size_t layer : dense_layers_)
    require(layer < layers, "paged selection cache: dense layer {} is out of range; the cache has {} layers", layer,
            layers);
  for (size_t layer = 0; layer < layers; ++layer)
    for (size_t h = 0; h < kv_heads; ++h)
      require(dense(layer) || (codec_base(cache_.key_codec(layer, h)).reads_scattered_rows() &&
                               codec_base(cache_.value_codec(layer, h)).reads_scattered_rows()),
              "paged selection cache: layer {} head {} encodes rows in groups ({} | {}); selection reads single rows",
              layer, h, cache_.key_codec(layer, h).spec(), cache_.value_codec(layer, h).spec());
}

SequenceId PagedSelectionCache::add_sequence() {
  Heads heads(cache_.layers() * cache_.kv_heads());
  for (size_t layer = 0; layer < cache_.layers(); ++layer)
    if (!dense(layer))
      for (size_t h = 0; h < cache_.kv_heads(); ++h) heads[layer * cache_.kv_heads() + h].selector = prototype_->clone();
  const SequenceId id = cache_.add_sequence();
  sequences_.emplace(id, std::move(heads));
  return id;
}

SequenceId PagedSelectionCache::fork(SequenceId source) {
  const Heads& from = heads_of(source, "fork");
  Heads heads(from.size());
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i].selector) heads[i].selector = from[i].selector->clone();
    heads[i].pending_keys = from[i].pending_keys;
    heads[i].pending_values = from[i].pending_values;
  }
  const SequenceId id = cache_.fork(source);
  sequences_.emplace(id, std::move(heads));
  return id;
}

void PagedSelectionCache::truncate(SequenceId sequence, size_t tokens) {
  heads_of(sequence, "truncate");
  cache_.truncate(sequence, tokens);  // refuses what rollback cannot take back; nothing below is refused
  Heads& heads = sequences_.at(sequence);
  const size_t d = cache_.head_dim(), sinks = cache_.policy().sinks;
  for (size_t layer = 0; layer < cache_.layers(); ++layer) {
    if (dense(layer)) continue;
    const size_t held = cache_.tokens(sequence, layer), past_sinks = held - std::min(held, sinks);
    for (size_t h = 0; h < cache_.kv_heads(); ++h) {
      HeadSelector& head = heads[layer * cache_.kv_heads() + h];
      // The selector holds no token rollback keeps: what truncate took back was pending.
      require(head.selector->tokens() <= past_sinks, "truncate: layer {} head {} indexes {} tokens of {} (internal)",
              layer, h, head.selector->tokens(), past_sinks);
      const size_t pending = past_sinks - head.selector->tokens();
      head.pending_keys.resize(pending * d);
      head.pending_values.resize(pending * d);
    }
  }
}

void PagedSelectionCache::remove_sequence(SequenceId sequence) {
  heads_of(sequence, "remove_sequence");
  cache_.remove_sequence(sequence);
  sequences_.erase(sequence);
}

void PagedSelectionCache::append(SequenceId sequence, size_t layer, const float* keys, const float* values,
                                 size_t tokens) {
  heads_of(sequence, "append");
  const size_t sinks = cache_.policy().sinks;
  const size_t before = layer < cache_.layers() ? cache_.tokens(sequence, layer) : 0;
  cache_.append(sequence, layer, keys, values, tokens);  // checks everything; nothing below is refused
  if (dense(layer)) return;
  const size_t d = cache_.head_dim(), kv_heads = cache_.kv_heads();
  const size_t to_sinks = std::min(before + tokens, sinks) - std::min(before, sinks);
  Heads& heads = sequences_.at(sequence);
  for (size_t h = 0; h < kv_heads; ++h) {
    HeadSelector& head = heads[layer * kv_heads + h];
    append_as_held(head.pending_keys, keys + (h * tokens + to_sinks) * d, (tokens - to_sinks) * d);
    append_as_held(head.pending_values, values + (h * tokens + to_sinks) * d, (tokens - to_sinks) * d);
  }
  feed(sequence, layer, heads);
}

void PagedSelectionCache::feed(SequenceId sequence, size_t layer, Heads& heads) {
  const SequenceLayer& rows = cache_.state_->sequence(sequence, "append").layers[layer];
  const size_t d = cache_.head_dim(), block = cache_.policy().block;
  // Tokens truncate can still take back: the encoded ones whose fp16 rollback keeps.
  const size_t settled = (rows.body - rows.heads.front().retained) / block * block;
  for (size_t h = 0; h < cache_.kv_heads(); ++h) {
    HeadSelector& head = heads[layer * cache_.kv_heads() + h];
    const size_t first = head.selector->tokens();
    if (settled > first) feed_pending(*head.selector, head.pending_keys, head.pending_values, settled - first, block, d);
  }
}

void PagedSelectionCache::attention(size_t layer, const SequenceId* sequences, size_t batch, const float* queries,
                                    size_t q_heads, float* output, float* lse, uint64_t draw) const {
  if (dense(layer)) return cache_.decode(layer, sequences, batch, queries, q_heads, output, lse);
  const PagedKVCache::State& s = *cache_.state_;
  s.check_layer(layer, "attention");
  if (batch == 0) return;
  require(sequences != nullptr, "attention: null sequence ids for a batch of {}", batch);
  require(output != nullptr, "attention: null output buffer");
  const size_t kv_heads = cache_.kv_heads(), d = cache_.head_dim();
  require(queries != nullptr && q_heads > 0 && q_heads % kv_heads == 0,
          "attention: {} query heads is not a positive multiple of the {} kv heads", q_heads, kv_heads);
  require_finite_rows(queries, batch * q_heads, d, "attention (queries)");
  // Every sequence's pages, per KV head, gathered and checked before the parallel part.
  std::vector<const SequenceLayer*> rows(batch);
  std::vector<const Heads*> heads(batch);
  std::vector<std::vector<const CodeBuffer*>> key_pages(batch * kv_heads), value_pages(batch * kv_heads);
  for (size_t b = 0; b < batch; ++b) {
    heads[b] = &heads_of(sequences[b], "attention");
    rows[b] = &s.sequence(sequences[b], "attention").layers[layer];
    for (size_t g = 0; g < kv_heads; ++g) {
      key_pages[b * kv_heads + g] = head_pages(*rows[b], g, true);
      value_pages[b * kv_heads + g] = head_pages(*rows[b], g, false);
    }
  }
  const size_t group = q_heads / kv_heads, items = batch * q_heads;
  static const CodeBuffer* const kNoPage = nullptr;  // where a body has no page yet
  // Sequences and query heads are independent and selectors answer concurrently: the same bits on
  // any thread count. An error inside is carried out of the parallel loop and thrown after it.
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1) if (items > 1)
  for (long item = 0; item < static_cast<long>(items); ++item) {
    try {
      const size_t b = static_cast<size_t>(item) / q_heads, q = static_cast<size_t>(item) % q_heads, g = q / group;
      const SequenceLayer& layer_rows = *rows[b];
      const HeadRows& head = layer_rows.heads[g];
      const TokenSelector& selector = *(*heads[b])[layer * kv_heads + g].selector;
      const auto& keys = key_pages[b * kv_heads + g];
      const auto& values = value_pages[b * kv_heads + g];
      const auto body = [&](size_t first, size_t count) {
        return BodyView::paged(cache_.key_codec(layer, g), keys.empty() ? &kNoPage : keys.data(),
                               cache_.value_codec(layer, g), values.empty() ? &kNoPage : values.data(), s.page,
                               first, count);
      };
      const float* query = queries + static_cast<size_t>(item) * d;
      const size_t indexed = selector.tokens();
      const BodyView view = body(0, indexed);
      const uint64_t step = (draw * cache_.layers() + layer) * kv_heads + g;  // a distinct draw per layer and head
      AttentionResult out = weighted_attention(query, view, selector.select(query, view, step));
      if (layer_rows.body > indexed)
        merge_attention(out, dense_attention(query, body(indexed, layer_rows.body - indexed)));
      // The fp16 sinks and the window's tokens not yet encoded; an empty part adds nothing.
      if (head.sinks > 0)
        merge_attention(out, dense_attention(query, BodyView::half(head.sink_keys.data(), head.sink_values.data(),
                                                                   head.sinks, d)));
      const size_t live = head.retained * d;
      if (head.window > 0)
        merge_attention(out, dense_attention(query, BodyView::half(head.window_keys.data() + live,
                                                                   head.window_values.data() + live, head.window, d)));
      std::copy(out.output.begin(), out.output.end(), output + static_cast<size_t>(item) * d);
      if (lse) lse[item] = out.lse[0];
    } catch (...) {
#pragma omp critical(kvsketch_paged_selection_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

const PagedSelectionCache::Heads& PagedSelectionCache::heads_of(SequenceId sequence, const char* operation) const {
  const auto found = sequences_.find(sequence);
  require(found != sequences_.end(), "{}: no sequence {}", operation, sequence);
  return found->second;
}

const TokenSelector& PagedSelectionCache::selector(SequenceId sequence, size_t layer, size_t kv_head) const {
  const Heads& heads = heads_of(sequence, "selector");
  require(layer < cache_.layers() && kv_head < cache_.kv_heads(), "selector: layer {} head {} is out of range", layer,
          kv_head);
  require(!dense(layer), "selector: layer {} is dense (attended in full, no selector)", layer);
  return *heads[layer * cache_.kv_heads() + kv_head].selector;
}

size_t PagedSelectionCache::indexed_tokens(SequenceId sequence, size_t layer) const {
  const Heads& heads = heads_of(sequence, "indexed_tokens");
  require(layer < cache_.layers(), "indexed_tokens: layer {} is out of range; the cache has {} layers", layer,
          cache_.layers());
  return dense(layer) ? 0 : heads[layer * cache_.kv_heads()].selector->tokens();
}

size_t PagedSelectionCache::index_bytes() const {
  size_t total = 0;
  for (const auto& [id, heads] : sequences_) total += index_bytes(id);
  return total;
}

size_t PagedSelectionCache::index_bytes(SequenceId sequence) const {
  size_t total = 0;
  for (const HeadSelector& head : heads_of(sequence, "index_bytes"))
    if (head.selector) total += head.selector->index_bytes();
  return total;
}

}  // namespace kvsketch
