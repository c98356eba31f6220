#include "kvsketch/calibration.hpp"

#include <map>
#include <string>

#include "cache/cache_codecs.hpp"
#include "kvsketch/codec.hpp"
#include "core/require.hpp"
#include "kvsketch/kv_cache.hpp"

namespace kvsketch {
namespace {

// Whether a spec's codec is fitted to data (asked once per distinct spec).
bool calibrated_by_data(const std::string& spec, size_t head_dim, std::map<std::string, bool>& known) {
  auto [it, fresh] = known.try_emplace(spec, false);
  if (fresh) it->second = make_codec(spec, head_dim)->calibrated_by_data();
  return it->second;
}

}  // namespace

Calibration::Calibration(size_t layers, size_t kv_heads, size_t head_dim, const KVPolicy& policy, uint64_t seed)
    : Calibration(layers, kv_heads, head_dim, policy, seed, KVCache::kMaxCodecStateBytes) {}

Calibration::Calibration(size_t layers, size_t kv_heads, size_t head_dim, const KVPolicy& policy, uint64_t seed,
                         size_t max_codec_state_bytes)
    : layers_(layers), kv_heads_(kv_heads), head_dim_(head_dim), policy_(policy), seed_(seed) {
  check_cache_shape({layers, kv_heads, head_dim}, policy, max_codec_state_bytes, "Calibration");
  const size_t heads = layers * kv_heads;
  fitted_.assign(heads, 1);
  key_states_.resize(heads);
  value_states_.resize(heads);
  std::map<std::string, bool> known;
  for (size_t layer = 0; layer < layers; ++layer) {
    const KVCodecPair& pair = policy.codecs_for(layer);
    if (!calibrated_by_data(pair.key, head_dim, known) && !calibrated_by_data(pair.value, head_dim, known)) continue;
    needs_data_ = true;
    for (size_t h = 0; h < kv_heads; ++h) fitted_[index(layer, h)] = 0;
  }
}

size_t Calibration::index(size_t layer, size_t kv_head) const {
  require(layer < layers_, "Calibration: layer {} out of range; it has {} layers", layer, layers_);
  require(kv_head < kv_heads_, "Calibration: kv head {} out of range; it has {} kv heads", kv_head, kv_heads_);
  return layer * kv_heads_ + kv_head;
}

bool Calibration::fitted(size_t layer, size_t kv_head) const { return fitted_[index(layer, kv_head)] != 0; }

bool Calibration::fitted(size_t layer) const {
  for (size_t h = 0; h < kv_heads_; ++h)
    if (!fitted(layer, h)) return false;
  return true;
}

bool Calibration::complete() const {
  for (const uint8_t f : fitted_)
    if (!f) return false;
  return true;
}

void Calibration::fit(size_t layer, const float* keys, const float* values, size_t tokens) {
  index(layer, 0);
  require(keys != nullptr && values != nullptr, "Calibration::fit: null keys or values");
  // Every head fitted before any is replaced: a refused sample leaves the layer as it was.
  std::vector<std::vector<uint8_t>> key_states(kv_heads_), value_states(kv_heads_);
  Calibration scratch = *this;
  for (size_t h = 0; h < kv_heads_; ++h) {
    scratch.fit_head(layer, h, keys + h * tokens * head_dim_, values + h * tokens * head_dim_, tokens);
  }
  for (size_t h = 0; h < kv_heads_; ++h) {
    const size_t i = index(layer, h);
    key_states_[i] = std::move(scratch.key_states_[i]);
    value_states_[i] = std::move(scratch.value_states_[i]);
    fitted_[i] = 1;
  }
}

void Calibration::fit_head(size_t layer, size_t kv_head, const float* keys, const float* values, size_t tokens) {
  const size_t i = index(layer, kv_head);
  require(keys != nullptr && values != nullptr, "Calibration::fit: null keys or values");
  require(tokens >= 1, "Calibration::fit: layer {}, kv head {}: the sample holds no tokens", layer, kv_head);
  require_finite(keys, tokens, head_dim_, "Calibration::fit (keys)");
  require_finite(values, tokens, head_dim_, "Calibration::fit (values)");
  const KVCodecPair& pair = policy_.codecs_for(layer);
  std::vector<uint8_t> states[2];
  for (const int role : {0, 1}) {
    auto codec = make_codec(role == 0 ? pair.key : pair.value, head_dim_, head_codec_seed(seed_, layer, kv_head, role));
    if (!codec->calibrated_by_data()) continue;
    codec->calibrate(role == 0 ? keys : values, tokens);
    states[role] = codec->calibration();
  }
  key_states_[i] = std::move(states[0]);
  value_states_[i] = std::move(states[1]);
  fitted_[i] = 1;
}

void Calibration::set_head(size_t layer, size_t kv_head, std::vector<uint8_t> key_state,
                           std::vector<uint8_t> value_state) {
  const size_t i = index(layer, kv_head);
  const KVCodecPair& pair = policy_.codecs_for(layer);
  for (const int role : {0, 1}) {
    const std::vector<uint8_t>& state = role == 0 ? key_state : value_state;
    auto codec = make_codec(role == 0 ? pair.key : pair.value, head_dim_, head_codec_seed(seed_, layer, kv_head, role));
    if (codec->calibrated_by_data()) {
      codec->set_calibration(state);  // refuses a state of the wrong size or with invalid contents
    } else {
      require(state.empty(), "codec {} is fitted to no data, but a state of {} bytes is given", codec->spec(),
              state.size());
    }
  }
  key_states_[i] = std::move(key_state);
  value_states_[i] = std::move(value_state);
  fitted_[i] = 1;
}

const std::vector<uint8_t>& Calibration::key_state(size_t layer, size_t kv_head) const {
  return key_states_[index(layer, kv_head)];
}

const std::vector<uint8_t>& Calibration::value_state(size_t layer, size_t kv_head) const {
  return value_states_[index(layer, kv_head)];
}

size_t Calibration::bytes() const {
  size_t total = 0;
  for (size_t i = 0; i < key_states_.size(); ++i) total += key_states_[i].size() + value_states_[i].size();
  return total;
}

bool operator==(const Calibration& a, const Calibration& b) {
  return a.layers_ == b.layers_ && a.kv_heads_ == b.kv_heads_ && a.head_dim_ == b.head_dim_ &&
         a.policy_.spec() == b.policy_.spec() && a.seed_ == b.seed_ && a.fitted_ == b.fitted_ &&
         a.key_states_ == b.key_states_ && a.value_states_ == b.value_states_;
}

}  // namespace kvsketch
