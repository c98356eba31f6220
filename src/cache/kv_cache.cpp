#include "kvsketch/kv_cache.hpp"

#include <algorithm>
#include <cmath>

#include "cache/cache_codecs.hpp"
#include "cache/half_rows.hpp"
#include "core/require.hpp"
#include "kvsketch/half.hpp"
#include "simd/attention_kernels.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {
KVCache::KVCache(size_t layers, size_t kv_heads, size_t head_dim, const KVPolicy& policy, uint64_t seed,
                 size_t max_codec_state_bytes)
    : layers_(layers), kv_heads_(kv_heads), head_dim_(head_dim), policy_(policy), seed_(seed) {
  check_cache_shape({layers, kv_heads, head_dim}, policy, max_codec_state_bytes, "KVCache");
  HeadCodecs codecs = make_head_codecs({layers, kv_heads, head_dim}, policy, seed, "KVCache");
  for (auto& codec : codecs.keys) key_codecs_.push_back(std::move(codec));
  for (auto& codec : codecs.values) value_codecs_.push_back(std::move(codec));
  // The window grows as tokens come (no reservation up front: a policy may allow a window of 2^24
  // tokens that a short sequence never fills).
  heads_.resize(layers * kv_heads);
  for (size_t i = 0; i < heads_.size(); ++i) {
    heads_[i].body_keys = key_codecs_[i]->make_buffer();
    heads_[i].body_values = value_codecs_[i]->make_buffer();
  }
}

void KVCache::check_layer(size_t layer, const char* operation) const {
  require(layer < layers_, "{}: layer {} out of range; the cache has {} layers", operation, layer, layers_);
}

size_t KVCache::tokens(size_t layer) const {
  check_layer(layer, "tokens");
  return heads_[index(layer, 0)].tokens();
}

const HeadCache& KVCache::head(size_t layer, size_t kv_head) const {
  check_layer(layer, "head");
  require(kv_head < kv_heads_, "head: kv head {} out of range; the cache has {} kv heads", kv_head, kv_heads_);
  return heads_[index(layer, kv_head)];
}

const VectorCodec& KVCache::key_codec(size_t layer, size_t kv_head) const {
  head(layer, kv_head);
  return *key_codecs_[index(layer, kv_head)];
}

const VectorCodec& KVCache::value_codec(size_t layer, size_t kv_head) const {
  head(layer, kv_head);
  return *value_codecs_[index(layer, kv_head)];
}

void KVCache::calibrate_codecs(const HeadCache& head, size_t layer, size_t kv_head) {
  // The first sinks + window + block tokens of the sequence: exactly what the cache holds when it
  // first encodes, whether the tokens came in one block or one at a time.
  const size_t window_rows = std::min(head.window_count, policy_.window + policy_.block);
  const size_t rows = head.sink_count + window_rows;
  std::vector<float> x(rows * head_dim_);
  for (const bool keys : {true, false}) {
    VectorCodec& codec = keys ? *key_codecs_[index(layer, kv_head)] : *value_codecs_[index(layer, kv_head)];
    if (!codec.calibrated_by_data()) continue;
    const auto& sinks = keys ? head.sink_keys : head.sink_values;
    const auto& window = keys ? head.window_keys : head.window_values;
    simd::half_to_float_row(sinks.data(), head.sink_count * head_dim_, x.data());
    simd::half_to_float_row(window.data(), window_rows * head_dim_, x.data() + head.sink_count * head_dim_);
    codec.calibrate(x.data(), rows);
  }
}

void KVCache::encode_oldest_window_tokens(HeadCache& head, size_t layer, size_t kv_head, size_t tokens) {
  std::vector<float> rows(tokens * head_dim_);
  simd::half_to_float_row(head.window_keys.data(), rows.size(), rows.data());
  key_codecs_[index(layer, kv_head)]->encode(rows.data(), tokens, head.body_keys);
  simd::half_to_float_row(head.window_values.data(), rows.size(), rows.data());
  value_codecs_[index(layer, kv_head)]->encode(rows.data(), tokens, head.body_values);
}

void KVCache::append(size_t layer, const float* keys, const float* values, size_t tokens) {
  check_layer(layer, "append");
  if (tokens == 0) return;
  require(keys != nullptr && values != nullptr, "append: null keys or values for {} tokens", tokens);
  const size_t position = this->tokens(layer);
  check_half_range(keys, layer, kv_heads_, tokens, position, head_dim_, "keys");
  check_half_range(values, layer, kv_heads_, tokens, position, head_dim_, "values");
  // Encoding can still fail (a norm beyond what the codec stores): every head's state before the
  // append is kept to undo it. Sinks and body only grow at their ends, so sizes undo them; the
  // window loses its front once a head encodes, and a head's first encode calibrates its codecs,
  // so those are copied first, and only by the appends that encode (the window holds at most
  // window + block - 1 old tokens).
  struct Before {
    size_t sink_count, window_count, body_rows;
    bool window_saved = false, calibration_saved = false;
    std::vector<uint16_t> window_keys, window_values;
    std::vector<uint8_t> key_calibration, value_calibration;
  };
  std::vector<Before> before(kv_heads_);
  for (size_t h = 0; h < kv_heads_; ++h) {
    const HeadCache& head = heads_[index(layer, h)];
    before[h].sink_count = head.sink_count;
    before[h].window_count = head.window_count;
    before[h].body_rows = head.body_count();
  }
  try {
    for (size_t h = 0; h < kv_heads_; ++h) {
      HeadCache& head = heads_[index(layer, h)];
      const float* head_keys = keys + h * tokens * head_dim_;
      const float* head_values = values + h * tokens * head_dim_;
      // The first tokens of a sequence are its sinks; the rest enter the window.
      const bool sinks_open = head.body_count() == 0 && head.window_count == 0;
      const size_t to_sinks = sinks_open ? std::min(tokens, policy_.sinks - head.sink_count) : 0;
      append_halves(head.sink_keys, head_keys, to_sinks * head_dim_);
      append_halves(head.sink_values, head_values, to_sinks * head_dim_);
      head.sink_count += to_sinks;
      // A long prefill passes through the window in chunks, as if streamed (which gives the same
      // codes), so the window and the float copy encoding reads stay small.
      for (size_t done = to_sinks; done < tokens;) {
        const size_t chunk = std::min(tokens - done, kAppendChunk);
        append_halves(head.window_keys, head_keys + done * head_dim_, chunk * head_dim_);
        append_halves(head.window_values, head_values + done * head_dim_, chunk * head_dim_);
        head.window_count += chunk;
        done += chunk;
        if (head.window_count < policy_.window + policy_.block) continue;
        if (!before[h].window_saved) {
          const auto old = static_cast<std::ptrdiff_t>(before[h].window_count * head_dim_);
          before[h].window_keys.assign(head.window_keys.begin(), head.window_keys.begin() + old);
          before[h].window_values.assign(head.window_values.begin(), head.window_values.begin() + old);
          before[h].window_saved = true;
        }
        const size_t moved = (head.window_count - policy_.window) / policy_.block * policy_.block;
        if (head.body_count() == 0) {  // the first encode calibrates: keep what it replaces
          before[h].key_calibration = key_codecs_[index(layer, h)]->calibration();
          before[h].value_calibration = value_codecs_[index(layer, h)]->calibration();
          before[h].calibration_saved = true;
          calibrate_codecs(head, layer, h);
        }
        encode_oldest_window_tokens(head, layer, h, moved);
        const auto erase = static_cast<std::ptrdiff_t>(moved * head_dim_);
        head.window_keys.erase(head.window_keys.begin(), head.window_keys.begin() + erase);
        head.window_values.erase(head.window_values.begin(), head.window_values.begin() + erase);
        head.window_count -= moved;
      }
    }
  } catch (...) {
    for (size_t h = 0; h < kv_heads_; ++h) {
      HeadCache& head = heads_[index(layer, h)];
      head.sink_count = before[h].sink_count;
      head.window_count = before[h].window_count;
      head.sink_keys.resize(head.sink_count * head_dim_);
      head.sink_values.resize(head.sink_count * head_dim_);
      if (before[h].window_saved) {
        head.window_keys = std::move(before[h].window_keys);
        head.window_values = std::move(before[h].window_values);
      }
      head.window_keys.resize(head.window_count * head_dim_);
      head.window_values.resize(head.window_count * head_dim_);
      head.body_keys.resize(before[h].body_rows);
      head.body_values.resize(before[h].body_rows);
      if (before[h].calibration_saved) {
        key_codecs_[index(layer, h)]->set_calibration(before[h].key_calibration);
        value_codecs_[index(layer, h)]->set_calibration(before[h].value_calibration);
      }
    }
    throw;
  }
}

size_t KVCache::bytes(size_t layer, size_t kv_head) const {
  const HeadCache& h = head(layer, kv_head);
  return 2 * (h.sink_keys.size() + h.sink_values.size() + h.window_keys.size() + h.window_values.size()) +
         h.body_keys.bytes() + h.body_values.bytes() + calibration_bytes(layer, kv_head);
}

size_t KVCache::calibration_bytes(size_t layer, size_t kv_head) const {
  return key_codec(layer, kv_head).calibration().size() + value_codec(layer, kv_head).calibration().size();
}

size_t KVCache::bytes(size_t layer) const {
  size_t total = 0;
  for (size_t h = 0; h < kv_heads_; ++h) total += bytes(layer, h);
  return total;
}

size_t KVCache::bytes() const {
  size_t total = 0;
  for (size_t layer = 0; layer < layers_; ++layer) total += bytes(layer);
  return total;
}

size_t KVCache::allocated_bytes() const {
  size_t total = 0;
  for (size_t i = 0; i < heads_.size(); ++i) {
    const HeadCache& h = heads_[i];
    total += 2 * (h.sink_keys.capacity() + h.sink_values.capacity() + h.window_keys.capacity() +
                  h.window_values.capacity()) +
             h.body_keys.allocated_bytes() + h.body_values.allocated_bytes() +
             calibration_bytes(i / kv_heads_, i % kv_heads_);
  }
  return total;
}

void KVCache::shrink_to_fit() {
  for (HeadCache& h : heads_) {
    h.sink_keys.shrink_to_fit();
    h.sink_values.shrink_to_fit();
    h.window_keys.shrink_to_fit();
    h.window_values.shrink_to_fit();
    h.body_keys.shrink_to_fit();
    h.body_values.shrink_to_fit();
  }
}

double KVCache::bits_per_value() const {
  size_t values = 0;
  for (const HeadCache& h : heads_) values += 2 * h.tokens() * head_dim_;
  return values ? 8.0 * static_cast<double>(bytes()) / static_cast<double>(values) : 0.0;
}

}  // namespace kvsketch
