#include "model/policy_store.hpp"

#include <set>

#include "core/require.hpp"
#include "kvsketch/codec.hpp"
#include "kvsketch/random.hpp"
#include "kvsketch/sparse_attention.hpp"

namespace kvsketch::model {

namespace {

// A command line's policy: the KVPolicy spec, and the runtime's own `select=` and `dense=` parts.
struct RuntimePolicy {
  std::string kv, selector;
  std::set<size_t> dense;
};

RuntimePolicy split_runtime_policy(const std::string& policy) {
  RuntimePolicy out;
  bool dense_given = false;
  size_t start = 0;
  for (;;) {
    const size_t end = policy.find('|', start);
    const std::string part = policy.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (part.rfind("select=", 0) == 0) {
      require(out.selector.empty(), "policy {}: select= is given twice", policy);
      out.selector = part.substr(7);
      require(!out.selector.empty(), "policy {}: select= names no selector", policy);
    } else if (part.rfind("dense=", 0) == 0) {
      dense_given = true;
      const std::string list = part.substr(6);
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        const std::string number = list.substr(at, comma - at);
        require(!number.empty() && number.find_first_not_of("0123456789") == std::string::npos && number.size() < 10,
                "policy {}: dense= takes layer numbers separated by commas, got '{}'", policy, list);
        out.dense.insert(std::stoul(number));
        at = comma + 1;
      }
    } else {
      out.kv += (out.kv.empty() ? "" : "|") + part;
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  require(!dense_given || !out.selector.empty(), "policy {}: dense= needs select=", policy);
  return out;
}

}  // namespace

PolicyStore::PolicyStore(const LanguageModel& model, const std::string& policy, uint64_t seed, ChunkAttention chunks)
    : config_(&model.config()), chunks_(chunks) {
  if (policy != "exact") {
    const RuntimePolicy parts = split_runtime_policy(policy);
    if (!parts.selector.empty())
      selection_.emplace(config_->layers, config_->kv_heads, config_->head_dim, KVPolicy::parse(parts.kv),
                         parts.selector, parts.dense, seed);
    else
      cache_.emplace(model.make_cache(KVPolicy::parse(parts.kv), seed));
  }
  add_sequence();
}

KVStore& PolicyStore::add_sequence() {
  if (selection_)
    stores_.push_back(std::make_unique<SelectedKV>(*selection_, chunks_));
  else if (cache_)
    stores_.push_back(std::make_unique<CompressedKV>(*cache_, AttentionOptions{}, chunks_));
  else
    stores_.push_back(std::make_unique<ExactKV>(config_->layers, config_->kv_heads, config_->head_dim));
  return *stores_.back();
}

double PolicyStore::bits_per_value() const {
  size_t tokens = 0, held = 0;
  for (const auto& store : stores_) {
    tokens += store->tokens();
    held += store->bytes();
  }
  if (tokens == 0) return 0;
  const double values = 2.0 * tokens * config_->layers * config_->kv_heads * config_->head_dim;
  const size_t bytes = cache_       ? cache_->bytes()
                       : selection_ ? selection_->cache().bytes() + selection_->index_bytes()
                                    : held;
  return 8.0 * static_cast<double>(bytes) / values;
}

bool policy_is_randomized(const std::string& policy, size_t head_dim) {
  if (policy == "exact") return false;
  const RuntimePolicy parts = split_runtime_policy(policy);
  if (!parts.selector.empty()) {
    // Sampling selectors (MagicPIG's hash functions, uniform and oracle draws, BalanceKV's walk)
    // depend on the seed; top-k, exact and window do not.
    const std::string spec = make_selector(parts.selector, head_dim, 0)->spec();
    const std::string kind = spec.substr(0, spec.find(':'));
    if (kind != "topk" && kind != "exact" && kind != "window") return true;
  }
  const KVPolicy p = KVPolicy::parse(parts.kv);
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
