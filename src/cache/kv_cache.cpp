#include "kvsketch/kv_cache.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "codec/quad_rows_codec.hpp"
#include "kvsketch/error.hpp"
#include "kvsketch/half.hpp"
#include "kvsketch/random.hpp"
#include "simd/attention_kernels.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {
namespace {

// Refuses what an fp16 cache cannot hold, naming where it is.
void check_values(const float* x, size_t layer, size_t kv_heads, size_t tokens, size_t first_position, size_t dim,
                  const char* what) {
  // Fast scan: |x| > 65504 (0x477FE000), NaN and Inf all have larger magnitude bits.
  if (simd::largest_magnitude_bits(x, kv_heads * tokens * dim) <= 0x477FE000u) return;
  for (size_t h = 0; h < kv_heads; ++h)
    for (size_t t = 0; t < tokens; ++t)
      for (size_t c = 0; c < dim; ++c) {
        const float v = x[(h * tokens + t) * dim + c];
        if (std::isfinite(v) && std::abs(v) <= kHalfMax) continue;
        throw Error(fmt::format("append: {} of layer {}, kv head {}, token {} (position {}), channel {} is {}; "
                                "a cache holds finite fp16 values (|x| <= 65504)",
                                what, layer, h, t, first_position + t, c, v));
      }
}

// Tokens converted and moved through the window at a time by a long append.
constexpr size_t kAppendChunk = 2048;

void append_halves(std::vector<uint16_t>& out, const float* rows, size_t count) {
  const size_t start = out.size();
  out.resize(start + count);
  simd::float_to_half_row(rows, count, out.data() + start);
}

// The specs of a head's body codecs as the policy's layout stores them (kv_policy.hpp): a codec
// whose rows quads rearrange as quads:SPEC where the layout is quads, and under auto where the block
// holds whole quads and this CPU's fused kernel reads both the keys and the values in place.
// (What the rows are does not depend on the seeds: one answer serves every head of a layer.)
KVCodecPair body_specs(const KVCodecPair& pair, const KVPolicy& policy, size_t head_dim) {
  if (policy.layout == RowLayout::kPlain) return pair;
  const auto quads = [&](const std::string& spec) -> std::unique_ptr<QuadRowsCodec> {
    auto codec = make_codec(spec, head_dim);
    if (dynamic_cast<const QuadRowsCodec*>(codec.get()) || !QuadRowsCodec::rearranges(*codec)) return nullptr;
    return std::make_unique<QuadRowsCodec>(std::move(codec));
  };
  const auto key = quads(pair.key), value = quads(pair.value);
  if (policy.layout == RowLayout::kAuto &&
      (policy.block % 4 != 0 || !key || !value || !key->read_in_place(true) || !value->read_in_place(false)))
    return pair;
  return {key ? "quads:" + pair.key : pair.key, value ? "quads:" + pair.value : pair.value};
}

// body_specs of every layer, each distinct pair worked out once (it builds the codecs to ask them,
// which for a dense sketch or rotation is not free).
std::vector<KVCodecPair> layer_body_specs(const KVPolicy& policy, size_t layers, size_t head_dim) {
  std::map<std::pair<std::string, std::string>, KVCodecPair> known;
  std::vector<KVCodecPair> specs;
  for (size_t layer = 0; layer < layers; ++layer) {
    const KVCodecPair& pair = policy.codecs_for(layer);
    auto [it, fresh] = known.try_emplace({pair.key, pair.value});
    if (fresh) it->second = body_specs(pair, policy, head_dim);
    specs.push_back(it->second);
  }
  return specs;
}

// The state (VectorCodec::state_bytes) of the codecs a cache with these layer specs holds: seeds
// change a codec's values, not its size, so one key and one value codec per distinct spec tell.
size_t codec_state_bytes(const std::vector<KVCodecPair>& specs, size_t kv_heads, size_t head_dim) {
  std::map<std::pair<std::string, std::string>, size_t> per_head;
  size_t total = 0;
  for (const KVCodecPair& pair : specs) {
    auto [it, fresh] = per_head.try_emplace({pair.key, pair.value}, 0);
    if (fresh) it->second = make_codec(pair.key, head_dim)->state_bytes() + make_codec(pair.value, head_dim)->state_bytes();
    total += it->second * kv_heads;
  }
  return total;
}

}  // namespace

KVCache::KVCache(size_t layers, size_t kv_heads, size_t head_dim, const KVPolicy& policy, uint64_t seed,
                 size_t max_codec_state_bytes)
    : layers_(layers), kv_heads_(kv_heads), head_dim_(head_dim), policy_(policy), seed_(seed) {
  require(layers >= 1 && layers <= kMaxLayers, "KVCache: layers must be in 1..{}, got {}", kMaxLayers, layers);
  require(kv_heads >= 1 && kv_heads <= kMaxKVHeads, "KVCache: kv_heads must be in 1..{}, got {}", kMaxKVHeads,
          kv_heads);
  require(head_dim >= 2 && head_dim <= kMaxDim, "KVCache: head_dim must be in 2..{}, got {}", kMaxDim, head_dim);
  // Every head builds its own key and value codecs up front (rotation signs, sketches, tables):
  // the total is bounded so that construction takes seconds, not hours.
  require(layers * kv_heads <= kMaxHeads && layers * kv_heads * head_dim <= kMaxHeadValues,
          "KVCache: {} layers x {} kv heads x head_dim {} is beyond the limits ({} heads, {} heads x head_dim)", layers,
          kv_heads, head_dim, kMaxHeads, kMaxHeadValues);
  policy.validate();
  const auto dense_rotation = [](const KVCodecPair& pair) {
    return pair.key.find("rotation=haar") != std::string::npos || pair.value.find("rotation=haar") != std::string::npos;
  };
  bool haar = dense_rotation(policy.codecs);
  for (const auto& [layer, pair] : policy.layer_overrides) haar = haar || dense_rotation(pair);
  require(!haar || layers * kv_heads * head_dim * head_dim * head_dim <= (size_t{1} << 32),
          "KVCache: {} layers x {} kv heads of rotation=haar at head_dim {} would build a dense rotation per head "
          "(O(head_dim^3) each, beyond the limit of 2^32); use rotation=hadamard",
          layers, kv_heads, head_dim);
  for (const auto& [layer, pair] : policy.layer_overrides)
    require(layer < layers, "KVCache: policy overrides layer {}, but the cache has {} layers", layer, layers);
  const std::vector<KVCodecPair> specs = layer_body_specs(policy, layers, head_dim);
  const size_t state = codec_state_bytes(specs, kv_heads, head_dim);
  require(state <= max_codec_state_bytes,
          "KVCache: {} layers x {} kv heads of this policy's codecs would hold {} MB of rotations and sketches, "
          "beyond {} MB (a dense sketch per head: use sketch=hadamard)",
          layers, kv_heads, state >> 20, max_codec_state_bytes >> 20);
  heads_.resize(layers * kv_heads);
  for (size_t layer = 0; layer < layers; ++layer) {
    const KVCodecPair& pair = specs[layer];
    for (size_t h = 0; h < kv_heads; ++h) {
      // Every layer and head gets its own rotation and sketch, derived from the cache seed.
      key_codecs_.push_back(make_codec(pair.key, head_dim, derive_seed(seed, {layer, h, 0})));
      value_codecs_.push_back(make_codec(pair.value, head_dim, derive_seed(seed, {layer, h, 1})));
      for (const VectorCodec* codec : {key_codecs_.back().get(), value_codecs_.back().get()})
        require(policy.block % codec->row_group() == 0,
                "KVCache: codec {} encodes groups of {} tokens; the policy's block ({}) must be a multiple of it",
                codec->spec(), codec->row_group(), policy.block);
      HeadCache& head = heads_[index(layer, h)];
      head.body_keys = key_codecs_.back()->make_buffer();
      head.body_values = value_codecs_.back()->make_buffer();
      // The window grows as tokens come (no reservation up front: a policy may allow a window of
      // 2^24 tokens that a short sequence never fills).
    }
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
  check_values(keys, layer, kv_heads_, tokens, position, head_dim_, "keys");
  check_values(values, layer, kv_heads_, tokens, position, head_dim_, "values");
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
