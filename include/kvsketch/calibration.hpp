// Calibration: the data-dependent parts of a cache's codecs (the outlier channels of QJL and of a
// channel split, centring means, a PCA basis), fitted once per layer and KV head from a sample of
// the model's keys and values, and shared by every sequence of a PagedKVCache, so that the pages of
// different sequences are read by the same codecs. Policies whose codecs are data-oblivious (plain
// TurboQuant, int8, fp16) need no data: their calibration is complete as built.
//
//   kvsketch::Calibration calibration(32, 8, 128, policy, /*seed=*/1);
//   for (size_t layer = 0; layer < 32; ++layer)
//     calibration.fit(layer, sample_keys[layer], sample_values[layer], tokens);  // [kv_heads][tokens][128]
//   calibration.save("model.kvcal");
//   kvsketch::PagedKVCache cache(kvsketch::Calibration::load("model.kvcal"));
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kvsketch/kv_policy.hpp"

// The library is built with hidden visibility: what this header declares is its exported API.
#pragma GCC visibility push(default)
namespace kvsketch {

class Calibration {
 public:
  // An unfitted calibration for this cache shape, policy and seed (the codecs' seeds derive from
  // it, and a PCA basis depends on them). The shape and policy are checked as KVCache checks them.
  Calibration(size_t layers, size_t kv_heads, size_t head_dim, const KVPolicy& policy, uint64_t seed = 0);

  size_t layers() const { return layers_; }
  size_t kv_heads() const { return kv_heads_; }
  size_t head_dim() const { return head_dim_; }
  const KVPolicy& policy() const { return policy_; }
  uint64_t seed() const { return seed_; }

  // Whether any codec of the policy is fitted to data; if not, every head is fitted as built.
  bool needs_data() const { return needs_data_; }
  bool fitted(size_t layer, size_t kv_head) const;
  bool fitted(size_t layer) const;  // every KV head of the layer
  bool complete() const;            // every layer

  // Fits a layer's codecs on a sample of keys and values, [kv_heads][tokens][head_dim] floats each
  // (the first tokens of a sequence, or tokens drawn from many), replacing any earlier fit of the
  // layer. fit_head does one KV head ([tokens][head_dim] each). NaN and Inf are refused.
  void fit(size_t layer, const float* keys, const float* values, size_t tokens);
  void fit_head(size_t layer, size_t kv_head, const float* keys, const float* values, size_t tokens);

  // The fitted state of a head's key or value codec (VectorCodec::calibration(); empty for codecs
  // fitted to no data, and before fitting).
  const std::vector<uint8_t>& key_state(size_t layer, size_t kv_head) const;
  const std::vector<uint8_t>& value_state(size_t layer, size_t kv_head) const;
  // Bytes of every state (what a cache counts once for its calibration).
  size_t bytes() const;

  // Versioned binary file with a checksum; load() refuses truncated, corrupted or inconsistent files
  // (a state its codec would not accept) with an error naming the file.
  void save(const std::string& path) const;
  static Calibration load(const std::string& path);
  // The same contents without the file's magic and checksum, for embedding in other files (a
  // cache's, an engine's model file); from_bytes checks them as load() does, naming `what`.
  std::vector<uint8_t> to_bytes() const;
  static Calibration from_bytes(const uint8_t* data, size_t size, const std::string& what);

  friend bool operator==(const Calibration& a, const Calibration& b);

 private:
  // The public constructor with the codecs' state bounded by max_codec_state_bytes (load() bounds
  // it in proportion to the file).
  Calibration(size_t layers, size_t kv_heads, size_t head_dim, const KVPolicy& policy, uint64_t seed,
              size_t max_codec_state_bytes);
  size_t index(size_t layer, size_t kv_head) const;
  // Sets a head's states after checking them against freshly built codecs.
  void set_head(size_t layer, size_t kv_head, std::vector<uint8_t> key_state, std::vector<uint8_t> value_state);

  size_t layers_, kv_heads_, head_dim_;
  KVPolicy policy_;
  uint64_t seed_;
  bool needs_data_ = false;
  std::vector<uint8_t> fitted_;  // per head: 1 once fitted
  std::vector<std::vector<uint8_t>> key_states_, value_states_;
};

}  // namespace kvsketch
#pragma GCC visibility pop
