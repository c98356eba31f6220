#include "model/policy_store.hpp"

#include <set>

#include "core/require.hpp"
#include "kvsketch/codec.hpp"
#include "kvsketch/random.hpp"

namespace kvsketch::model {

PolicyStore::PolicyStore(const LanguageModel& model, const std::string& policy, uint64_t seed)
    : config_(&model.config()) {
  const ModelConfig& c = model.config();
  if (policy == "exact") {
    kv_ = std::make_unique<ExactKV>(c.layers, c.kv_heads, c.head_dim);
    return;
  }
  cache_.emplace(model.make_cache(KVPolicy::parse(policy), seed));
  kv_ = std::make_unique<CompressedKV>(*cache_);
}

double PolicyStore::bits_per_value() const {
  const size_t tokens = kv_->tokens();
  if (tokens == 0) return 0;
  const double values = 2.0 * tokens * config_->layers * config_->kv_heads * config_->head_dim;
  const size_t bytes = cache_ ? cache_->bytes() : kv_->bytes();
  return 8.0 * static_cast<double>(bytes) / values;
}

bool policy_is_randomized(const std::string& policy, size_t head_dim) {
  if (policy == "exact") return false;
  const KVPolicy p = KVPolicy::parse(policy);
  std::set<std::string> specs{p.codecs.key, p.codecs.value};
  for (const auto& [layer, pair] : p.layer_overrides) specs.insert({pair.key, pair.value});
  constexpr size_t kRows = 64;
  RandomStream stream(1, StreamPurpose::kTest, {head_dim});
  std::vector<float> x(kRows * head_dim);
  for (float& v : x) v = static_cast<float>(stream.gaussian());
  for (const std::string& spec : specs) {
    auto a = make_codec(spec, head_dim, 0), b = make_codec(spec, head_dim, 1);
    // Codecs fitted to data (outlier channels, PCA) fit both on the same rows first.
    if (a->calibrated_by_data()) {
      a->calibrate(x.data(), kRows);
      b->calibrate(x.data(), kRows);
    }
    CodeBuffer ca(a->code_bytes()), cb(b->code_bytes());
    a->encode(x.data(), kRows, ca);
    b->encode(x.data(), kRows, cb);
    if (ca.data() != cb.data()) return true;
  }
  return false;
}

void run_chunks(const LanguageModel& model, KVStore& kv, const int32_t* tokens, size_t count, size_t chunk,
                float* logits) {
  const size_t vocab = model.config().vocab_size;
  for (size_t at = 0; at < count; at += chunk) {
    const size_t n = std::min(chunk, count - at);
    model.forward(kv, tokens + at, n, logits ? logits + at * vocab : nullptr, logits ? n : 0);
  }
}

}  // namespace kvsketch::model
