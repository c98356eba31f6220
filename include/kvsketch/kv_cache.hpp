// KVCache: the key/value cache of a transformer, layers x kv_heads x head_dim, stored as a
// KVPolicy says. Per layer and KV head, in token order:
//   sinks   the first `sinks` tokens, fp16
//   body    compressed by the layer's key and value codecs (CodeBuffer rows); codecs with outlier
//           channels choose them from the first sinks + window + block tokens (the prefill)
//   window  the most recent tokens, fp16
// Tokens enter as fp16 (what a model's cache holds); the body codes are computed from those fp16
// values, block by block as tokens leave the window, so appending token by token gives the same
// bytes as one block append.
//
//   KVCache cache(32, 8, 128, KVPolicy::parse("tq_prod:b=3|tq_mse:b=3"), /*seed=*/1);
//   cache.append(layer, keys, values, tokens);   // [kv_heads][tokens][head_dim] floats each
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvsketch/codec.hpp"
#include "kvsketch/kv_policy.hpp"

// The library is built with hidden visibility: what this header declares is its exported API.
#pragma GCC visibility push(default)
namespace kvsketch {

struct HeadCache {
  std::vector<uint16_t> sink_keys, sink_values;      // sink_count x head_dim halves
  std::vector<uint16_t> window_keys, window_values;  // window_count x head_dim halves, oldest first
  // As the cache's key and value codecs write them: perhaps four rows interleaved, the packing the
  // cache chose for this CPU (kv_policy.hpp); read them through the codecs, or KVCache::save's
  // plain rows.
  CodeBuffer body_keys, body_values;
  size_t sink_count = 0, window_count = 0;
  size_t body_count() const { return body_keys.size(); }
  size_t tokens() const { return sink_count + body_count() + window_count; }
};

class KVCache {
 public:
  // Limits (checked by the constructor, which builds two codecs per head): layers in 1..kMaxLayers,
  // kv_heads in 1..kMaxKVHeads, head_dim in 2..kMaxDim, layers x kv_heads <= kMaxHeads and
  // layers x kv_heads x head_dim <= kMaxHeadValues (a 126-layer, 128-head, 128-dim model is 2M).
  // Policies with rotation=haar also need layers x kv_heads x head_dim^3 <= 2^32, and the codecs'
  // own state (dense sketches, rotations: VectorCodec::state_bytes) at most kMaxCodecStateBytes.
  static constexpr size_t kMaxLayers = 4096, kMaxKVHeads = 4096, kMaxHeads = 65536;
  static constexpr size_t kMaxHeadValues = size_t{1} << 24;
  static constexpr size_t kMaxCodecStateBytes = size_t{4} << 30;

  KVCache(size_t layers, size_t kv_heads, size_t head_dim, const KVPolicy& policy, uint64_t seed = 0)
      : KVCache(layers, kv_heads, head_dim, policy, seed, kMaxCodecStateBytes) {}

  size_t layers() const { return layers_; }
  size_t kv_heads() const { return kv_heads_; }
  size_t head_dim() const { return head_dim_; }
  const KVPolicy& policy() const { return policy_; }
  uint64_t seed() const { return seed_; }

  // Appends `tokens` tokens to one layer: keys and values are [kv_heads][tokens][head_dim].
  // NaN, Inf or values beyond fp16 are refused naming layer, head, token and channel; a refused
  // append leaves the cache unchanged.
  void append(size_t layer, const float* keys, const float* values, size_t tokens);

  size_t tokens(size_t layer) const;
  const HeadCache& head(size_t layer, size_t kv_head) const;
  const VectorCodec& key_codec(size_t layer, size_t kv_head) const;
  const VectorCodec& value_codec(size_t layer, size_t kv_head) const;

  // Bytes held: fp16 sinks and window, body codes (norms and all metadata inside), the codecs'
  // calibration (outlier channel lists), per head, per layer, in total. allocated_bytes() counts
  // the capacity behind them (>= bytes()).
  size_t bytes(size_t layer, size_t kv_head) const;
  size_t calibration_bytes(size_t layer, size_t kv_head) const;
  size_t bytes(size_t layer) const;
  size_t bytes() const;
  size_t allocated_bytes() const;
  void shrink_to_fit();
  // 8 * bytes() / (number of stored K and V numbers).
  double bits_per_value() const;

  // Versioned binary file with a checksum; load() refuses truncated or corrupted files.
  void save(const std::string& path) const;
  static KVCache load(const std::string& path);

 private:
  // The public constructor with the codecs' state bounded by max_codec_state_bytes instead (load()
  // bounds it in proportion to the file, whose header alone must not claim gigabytes of it).
  KVCache(size_t layers, size_t kv_heads, size_t head_dim, const KVPolicy& policy, uint64_t seed,
          size_t max_codec_state_bytes);
  size_t index(size_t layer, size_t kv_head) const { return layer * kv_heads_ + kv_head; }
  void check_layer(size_t layer, const char* operation) const;
  // Codecs with data-dependent setup (outlier channels) are calibrated on the first sinks + window
  // + block tokens, when the head first encodes.
  void calibrate_codecs(const HeadCache& head, size_t layer, size_t kv_head);
  // Appends the oldest `tokens` window tokens, encoded, to the body (the window keeps them).
  void encode_oldest_window_tokens(HeadCache& head, size_t layer, size_t kv_head, size_t tokens);

  size_t layers_, kv_heads_, head_dim_;
  KVPolicy policy_;
  uint64_t seed_;
  std::vector<HeadCache> heads_;
  std::vector<std::unique_ptr<VectorCodec>> key_codecs_, value_codecs_;
};

}  // namespace kvsketch
#pragma GCC visibility pop
