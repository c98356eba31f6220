#include "kvsketch/paged_cache.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_set>

#include "cache/cache_codecs.hpp"
#include "cache/half_rows.hpp"
#include "cache/paged_cache_state.hpp"
#include "core/require.hpp"

namespace kvsketch {
namespace {

// A page with room for `page` rows of every head's keys and values, reserved up front so that
// appends write into it without moving it.
std::shared_ptr<Page> new_page(const HeadCodecs& codecs, size_t layer, size_t kv_heads, size_t page) {
  auto fresh = std::make_shared<Page>();
  for (size_t h = 0; h < kv_heads; ++h) {
    fresh->keys.push_back(codecs.keys[layer * kv_heads + h]->make_buffer());
    fresh->values.push_back(codecs.values[layer * kv_heads + h]->make_buffer());
    fresh->keys.back().data().reserve(page * fresh->keys.back().code_bytes());
    fresh->values.back().data().reserve(page * fresh->values.back().code_bytes());
  }
  return fresh;
}

// The first `rows` rows of `page` as a page of its own, with room for `capacity` rows.
std::shared_ptr<Page> copy_rows(const Page& page, size_t rows, size_t capacity) {
  auto copy = std::make_shared<Page>();
  for (const bool keys : {true, false})
    for (const CodeBuffer& from : keys ? page.keys : page.values) {
      CodeBuffer to(from.code_bytes());
      to.data().reserve(capacity * from.code_bytes());
      to.data().assign(from.data().begin(), from.data().begin() + static_cast<std::ptrdiff_t>(rows * from.code_bytes()));
      (keys ? copy->keys : copy->values).push_back(std::move(to));
    }
  return copy;
}

// Every distinct page once and every sequence's fp16 rows: their sizes, or their capacities.
size_t held_bytes(const std::map<SequenceId, Sequence>& sequences, bool capacity) {
  size_t total = 0;
  std::unordered_set<const Page*> counted;
  for (const auto& [id, sequence] : sequences)
    for (const SequenceLayer& rows : sequence.layers) {
      for (const auto& page : rows.pages)
        if (counted.insert(page.get()).second) total += capacity ? page->allocated_bytes() : page->bytes();
      for (const HeadRows& head : rows.heads) total += capacity ? head.allocated_bytes() : head.bytes();
    }
  return total;
}

}  // namespace

PagedKVCache::State::State(Calibration calibration_)
    : shape{calibration_.layers(), calibration_.kv_heads(), calibration_.head_dim()},
      policy(calibration_.policy()), seed(calibration_.seed()), page(policy.page_tokens()),
      calibration(std::move(calibration_)), codecs(make_head_codecs(shape, policy, seed, "PagedKVCache")) {
  for (size_t layer = 0; layer < shape.layers; ++layer)
    for (size_t h = 0; h < shape.kv_heads; ++h)
      if (calibration.fitted(layer, h)) apply_calibration(layer, h);
}

void PagedKVCache::State::apply_calibration(size_t layer, size_t kv_head) {
  const size_t i = shape.index(layer, kv_head);
  if (codecs.keys[i]->calibrated_by_data()) codecs.keys[i]->set_calibration(calibration.key_state(layer, kv_head));
  if (codecs.values[i]->calibrated_by_data())
    codecs.values[i]->set_calibration(calibration.value_state(layer, kv_head));
}

Sequence& PagedKVCache::State::sequence(SequenceId id, const char* operation) {
  const auto it = sequences.find(id);
  require(it != sequences.end(), "{}: no sequence {} in the cache", operation, id);
  return it->second;
}

const Sequence& PagedKVCache::State::sequence(SequenceId id, const char* operation) const {
  return const_cast<State*>(this)->sequence(id, operation);
}

void PagedKVCache::State::check_layer(size_t layer, const char* operation) const {
  require(layer < shape.layers, "{}: layer {} out of range; the cache has {} layers", operation, layer, shape.layers);
}

void PagedKVCache::State::encode_window(SequenceLayer& rows, size_t layer, size_t count) {
  const size_t d = shape.head_dim;
  std::vector<float> x;
  for (size_t h = 0; h < shape.kv_heads; ++h) {
    const HeadRows& head = rows.heads[h];
    const size_t i = shape.index(layer, h);
    // Tokens [retained, retained + count) of the window vectors, page by page.
    for (size_t done = 0; done < count;) {
      const size_t body = rows.body + done;
      const size_t page_index = body / page, in_page = body % page;
      if (page_index == rows.pages.size()) rows.pages.push_back(new_page(codecs, layer, shape.kv_heads, page));
      Page& target = *rows.pages[page_index];
      const size_t n = std::min(count - done, page - in_page);
      x.resize(n * d);
      const size_t from = (head.retained + done) * d;
      halves_to_floats(head.window_keys.data() + from, n * d, x.data());
      codecs.keys[i]->encode(x.data(), n, target.keys[h]);
      halves_to_floats(head.window_values.data() + from, n * d, x.data());
      codecs.values[i]->encode(x.data(), n, target.values[h]);
      done += n;
    }
  }
}

void PagedKVCache::State::fit_from_window(const SequenceLayer& rows, size_t layer, size_t kv_head) {
  // The first sinks + window + block tokens of the sequence: what a KVCache holds when it first
  // encodes, whether the tokens came in one block or one at a time.
  const HeadRows& head = rows.heads[kv_head];
  const size_t d = shape.head_dim, window_rows = std::min(head.window, policy.window + policy.block);
  const size_t n = head.sinks + window_rows;
  std::vector<float> keys(n * d), values(n * d);
  halves_to_floats(head.sink_keys.data(), head.sinks * d, keys.data());
  halves_to_floats(head.window_keys.data(), window_rows * d, keys.data() + head.sinks * d);
  halves_to_floats(head.sink_values.data(), head.sinks * d, values.data());
  halves_to_floats(head.window_values.data(), window_rows * d, values.data() + head.sinks * d);
  calibration.fit_head(layer, kv_head, keys.data(), values.data(), n);
  apply_calibration(layer, kv_head);
}

PagedKVCache::PagedKVCache(size_t layers, size_t kv_heads, size_t head_dim, const KVPolicy& policy, uint64_t seed)
    : PagedKVCache(Calibration(layers, kv_heads, head_dim, policy, seed)) {}

PagedKVCache::PagedKVCache(Calibration calibration) : state_(std::make_unique<State>(std::move(calibration))) {}

PagedKVCache::~PagedKVCache() = default;
PagedKVCache::PagedKVCache(PagedKVCache&&) noexcept = default;
PagedKVCache& PagedKVCache::operator=(PagedKVCache&&) noexcept = default;

size_t PagedKVCache::layers() const { return state_->shape.layers; }
size_t PagedKVCache::kv_heads() const { return state_->shape.kv_heads; }
size_t PagedKVCache::head_dim() const { return state_->shape.head_dim; }
const KVPolicy& PagedKVCache::policy() const { return state_->policy; }
uint64_t PagedKVCache::seed() const { return state_->seed; }
const Calibration& PagedKVCache::calibration() const { return state_->calibration; }

const VectorCodec& PagedKVCache::key_codec(size_t layer, size_t kv_head) const {
  state_->check_layer(layer, "key_codec");
  require(kv_head < kv_heads(), "key_codec: kv head {} out of range; the cache has {} kv heads", kv_head, kv_heads());
  return *state_->codecs.keys[state_->shape.index(layer, kv_head)];
}

const VectorCodec& PagedKVCache::value_codec(size_t layer, size_t kv_head) const {
  state_->check_layer(layer, "value_codec");
  require(kv_head < kv_heads(), "value_codec: kv head {} out of range; the cache has {} kv heads", kv_head,
          kv_heads());
  return *state_->codecs.values[state_->shape.index(layer, kv_head)];
}

SequenceId PagedKVCache::add_sequence() {
  Sequence sequence;
  sequence.layers.resize(layers());
  for (SequenceLayer& layer : sequence.layers) layer.heads.resize(kv_heads());
  const SequenceId id = state_->next_id++;
  state_->sequences.emplace(id, std::move(sequence));
  return id;
}

SequenceId PagedKVCache::fork(SequenceId source) {
  Sequence copy = state_->sequence(source, "fork");
  // Sealed pages are shared; a page with room would be written by both, so it is copied.
  for (SequenceLayer& layer : copy.layers)
    if (!layer.pages.empty() && layer.pages.back()->rows() < state_->page)
      layer.pages.back() = copy_rows(*layer.pages.back(), layer.pages.back()->rows(), state_->page);
  const SequenceId id = state_->next_id++;
  state_->sequences.emplace(id, std::move(copy));
  return id;
}

void PagedKVCache::remove_sequence(SequenceId sequence) {
  state_->sequence(sequence, "remove_sequence");
  state_->sequences.erase(sequence);
}

bool PagedKVCache::contains(SequenceId sequence) const { return state_->sequences.count(sequence) != 0; }

std::vector<SequenceId> PagedKVCache::sequences() const {
  std::vector<SequenceId> ids;
  for (const auto& [id, sequence] : state_->sequences) ids.push_back(id);
  return ids;
}

size_t PagedKVCache::tokens(SequenceId sequence, size_t layer) const {
  state_->check_layer(layer, "tokens");
  return state_->sequence(sequence, "tokens").layers[layer].tokens();
}

void PagedKVCache::truncate(SequenceId id, size_t tokens) {
  Sequence& sequence = state_->sequence(id, "truncate");
  const KVPolicy& policy = state_->policy;
  const TokenSplit target = split_tokens(tokens, policy.sinks, policy.window, policy.block);
  // Every layer is checked before any changes.
  for (size_t layer = 0; layer < layers(); ++layer) {
    const SequenceLayer& rows = sequence.layers[layer];
    require(tokens <= rows.tokens(), "truncate: sequence {} holds {} tokens in layer {}; it cannot keep {}", id,
            rows.tokens(), layer, tokens);
    const size_t kept_codes = rows.body - rows.heads.front().retained;  // encoded tokens without fp16
    require(target.body >= kept_codes,
            "truncate: keeping {} of the {} tokens of sequence {} re-opens encoded tokens of layer {} whose fp16 is not "
            "kept (the policy keeps the last {} encoded tokens: rollback={}); truncate to at least {} tokens there, or "
            "raise rollback",
            tokens, rows.tokens(), id, layer, rows.heads.front().retained, policy.rollback,
            std::min(rows.tokens(), policy.sinks + kept_codes + policy.window));
  }
  const size_t d = head_dim();
  for (SequenceLayer& rows : sequence.layers) {
    for (HeadRows& head : rows.heads) {
      const size_t kept_codes = rows.body - head.retained;
      head.sink_keys.resize(target.sinks * d);
      head.sink_values.resize(target.sinks * d);
      head.sinks = target.sinks;
      head.retained = target.body - kept_codes;
      head.window = target.window;
      head.window_keys.resize((head.retained + head.window) * d);
      head.window_values.resize((head.retained + head.window) * d);
    }
    const size_t page = state_->page, pages = (target.body + page - 1) / page;
    rows.pages.resize(pages);
    if (pages > 0) {
      const size_t keep = target.body - (pages - 1) * page;
      std::shared_ptr<Page>& last = rows.pages.back();
      if (keep < last->rows()) {
        if (last.use_count() > 1) {
          last = copy_rows(*last, keep, page);  // shared: the other sequences keep theirs
        } else {
          for (CodeBuffer& codes : last->keys) codes.resize(keep);
          for (CodeBuffer& codes : last->values) codes.resize(keep);
        }
      }
    }
    rows.body = target.body;
  }
}

void PagedKVCache::append(SequenceId id, size_t layer, const float* keys, const float* values, size_t tokens) {
  State& s = *state_;
  s.check_layer(layer, "append");
  SequenceLayer& rows = s.sequence(id, "append").layers[layer];
  if (tokens == 0) return;
  require(keys != nullptr && values != nullptr, "append: null keys or values for {} tokens", tokens);
  const size_t d = head_dim(), kv = kv_heads(), position = rows.tokens();
  check_half_range(keys, layer, kv, tokens, position, d, "keys");
  check_half_range(values, layer, kv, tokens, position, d, "values");
  const KVPolicy& policy = s.policy;
  const size_t keep_encoded = policy.rollback_tokens();

  // Encoding can still fail (a norm beyond what a codec stores): what the append changes is
  // recorded to undo it. Sinks and pages only grow at their ends, so sizes undo them; the window
  // loses its front once the layer encodes, and a first encode fits the calibration, so those are
  // copied first, and only by the appends that encode.
  const size_t pages_before = rows.pages.size(), body_before = rows.body;
  const size_t last_rows_before = pages_before ? rows.pages.back()->rows() : 0;
  // Every head holds the same counts (appends reach them all alike).
  const size_t sinks_before = rows.heads.front().sinks, retained_before = rows.heads.front().retained,
               window_before = rows.heads.front().window;
  std::vector<HeadRows> windows_before;  // whole window vectors, once the layer encodes
  std::optional<Calibration> calibration_before;
  std::vector<std::pair<std::vector<uint8_t>, std::vector<uint8_t>>> codec_states_before;
  try {
    const bool sinks_open = rows.body == 0 && rows.heads.front().window == 0;
    const size_t to_sinks = sinks_open ? std::min(tokens, policy.sinks - rows.heads.front().sinks) : 0;
    for (size_t h = 0; h < kv; ++h) {
      HeadRows& head = rows.heads[h];
      append_halves(head.sink_keys, keys + h * tokens * d, to_sinks * d);
      append_halves(head.sink_values, values + h * tokens * d, to_sinks * d);
      head.sinks += to_sinks;
    }
    for (size_t done = to_sinks; done < tokens;) {
      const size_t chunk = std::min(tokens - done, kAppendChunk);
      for (size_t h = 0; h < kv; ++h) {
        HeadRows& head = rows.heads[h];
        append_halves(head.window_keys, keys + (h * tokens + done) * d, chunk * d);
        append_halves(head.window_values, values + (h * tokens + done) * d, chunk * d);
        head.window += chunk;
      }
      done += chunk;
      const size_t window = rows.heads.front().window;
      if (window < policy.window + policy.block) continue;
      if (windows_before.empty()) {
        windows_before = rows.heads;  // before this chunk's tokens: trimmed back below if undone
        if (!s.calibration.fitted(layer)) {
          calibration_before = s.calibration;
          for (size_t h = 0; h < kv; ++h) {
            const size_t i = s.shape.index(layer, h);
            codec_states_before.emplace_back(s.codecs.keys[i]->calibration(), s.codecs.values[i]->calibration());
          }
        }
      }
      for (size_t h = 0; h < kv; ++h)
        if (!s.calibration.fitted(layer, h)) s.fit_from_window(rows, layer, h);
      const size_t moved = (window - policy.window) / policy.block * policy.block;
      s.encode_window(rows, layer, moved);
      rows.body += moved;
      for (HeadRows& head : rows.heads) {
        head.retained += moved;
        head.window -= moved;
        const size_t drop = head.retained - std::min(head.retained, keep_encoded);
        const auto erase = static_cast<std::ptrdiff_t>(drop * d);
        head.window_keys.erase(head.window_keys.begin(), head.window_keys.begin() + erase);
        head.window_values.erase(head.window_values.begin(), head.window_values.begin() + erase);
        head.retained -= drop;
      }
    }
    const size_t steady = (policy.window + policy.block + keep_encoded) * d;
    for (HeadRows& head : rows.heads) {
      trim_window_capacity(head.window_keys, steady);
      trim_window_capacity(head.window_values, steady);
    }
  } catch (...) {
    for (size_t h = 0; h < kv; ++h) {
      HeadRows& head = rows.heads[h];
      if (!windows_before.empty()) head = std::move(windows_before[h]);
      head.sinks = sinks_before;
      head.retained = retained_before;
      head.window = window_before;
      head.sink_keys.resize(head.sinks * d);
      head.sink_values.resize(head.sinks * d);
      head.window_keys.resize((head.retained + head.window) * d);
      head.window_values.resize((head.retained + head.window) * d);
    }
    rows.pages.resize(pages_before);
    if (pages_before) {
      for (CodeBuffer& codes : rows.pages.back()->keys) codes.resize(last_rows_before);
      for (CodeBuffer& codes : rows.pages.back()->values) codes.resize(last_rows_before);
    }
    rows.body = body_before;
    if (calibration_before) {
      s.calibration = std::move(*calibration_before);
      for (size_t h = 0; h < kv; ++h) {
        const size_t i = s.shape.index(layer, h);
        s.codecs.keys[i]->set_calibration(codec_states_before[h].first);
        s.codecs.values[i]->set_calibration(codec_states_before[h].second);
      }
    }
    throw;
  }
}

size_t PagedKVCache::bytes() const {
  return state_->calibration.bytes() + held_bytes(state_->sequences, /*capacity=*/false);
}

size_t PagedKVCache::sequence_bytes(SequenceId id) const {
  size_t total = 0;
  for (const SequenceLayer& rows : state_->sequence(id, "sequence_bytes").layers) {
    for (const auto& page : rows.pages) total += page->bytes();
    for (const HeadRows& head : rows.heads) total += head.bytes();
  }
  return total;
}

size_t PagedKVCache::pages() const {
  std::unordered_set<const Page*> distinct;
  for (const auto& [id, sequence] : state_->sequences)
    for (const SequenceLayer& rows : sequence.layers)
      for (const auto& page : rows.pages) distinct.insert(page.get());
  return distinct.size();
}

size_t PagedKVCache::allocated_bytes() const {
  return state_->calibration.bytes() + held_bytes(state_->sequences, /*capacity=*/true);
}

}  // namespace kvsketch
