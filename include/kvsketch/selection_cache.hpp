// SelectionCache: a KVCache whose compressed body is attended through a token selector (MagicPIG,
// BalanceKV, the baselines) at decode time, as the sampling papers serve it: the fp16 sinks and
// recent window exact, the body through the selection read straight from its codes (fp16 or
// TurboQuant alike), merged by log-sum-exp; chosen layers dense (MagicPIG keeps two of Llama's 32).
// The selectors follow the body as it grows, during prefill and decoding, fed the same fp16 keys
// the cache encodes, one policy block at a time (so a token-by-token stream and one long prefill
// build the same index).
// Its rows are plain, unless KVSKETCH_PACKING asks otherwise: the selection reads scattered rows,
// which rows in quads would have to copy out chunk by chunk, at about twice the time.
//
//   SelectionCache cache(32, 8, 128, KVPolicy::parse("tq_prod:b=3|tq_mse:b=3"), "magicpig:K=10,L=150",
//                        /*dense_layers=*/{0, 16}, /*seed=*/1);
//   cache.append(layer, keys, values, tokens);                 // as KVCache::append
//   AttentionResult r = cache.attention(layer, queries, 32);   // all query heads of the layer
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kvsketch/attention.hpp"
#include "kvsketch/kv_cache.hpp"
#include "kvsketch/sparse_attention.hpp"

// The library is built with hidden visibility: what this header declares is its exported API.
#pragma GCC visibility push(default)
namespace kvsketch {

class SelectionCache {
 public:
  SelectionCache(size_t layers, size_t kv_heads, size_t head_dim, const KVPolicy& policy, const std::string& selector,
                 std::set<size_t> dense_layers = {}, uint64_t seed = 0);

  // As KVCache::append ([kv_heads][tokens][head_dim] keys and values); then the tokens that
  // entered the body are appended to the layer's selectors. A refused append changes nothing.
  void append(size_t layer, const float* keys, const float* values, size_t tokens);

  // All query heads of a layer (q_heads x head_dim, a multiple of kv_heads): dense layers through
  // decode_attention_layer, the others as above; `draw` numbers the step for sampling selectors.
  AttentionResult attention(size_t layer, const float* queries, size_t q_heads, uint64_t draw = 0) const;

  const KVCache& cache() const { return cache_; }
  bool dense(size_t layer) const { return dense_layers_.count(layer) > 0; }
  const TokenSelector& selector(size_t layer, size_t kv_head) const;
  // The selectors' indexes, over every layer and head (KV bytes: cache().bytes()).
  size_t index_bytes() const;

 private:
  struct HeadSelector {
    std::unique_ptr<TokenSelector> selector;
    // Tokens past the sinks not yet in the body, as the cache holds them (fp16, widened).
    std::vector<float> pending_keys, pending_values;
  };
  HeadSelector& at(size_t layer, size_t kv_head) { return heads_[layer * cache_.kv_heads() + kv_head]; }
  const HeadSelector& at(size_t layer, size_t kv_head) const { return heads_[layer * cache_.kv_heads() + kv_head]; }

  KVCache cache_;
  std::set<size_t> dense_layers_;
  std::vector<HeadSelector> heads_;  // layer-major; no selector in dense layers
};

}  // namespace kvsketch
#pragma GCC visibility pop
