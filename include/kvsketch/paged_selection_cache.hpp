// PagedSelectionCache: a PagedKVCache whose sequences' compressed bodies are attended through token
// selectors (MagicPIG, BalanceKV, top-k, the baselines; sparse_attention.hpp), as SelectionCache
// does for one sequence: one selector per sequence, layer and KV head, fed the fp16 keys the cache
// encodes one policy block at a time; the fp16 sinks and window exact; chosen layers dense.
//
// The selectors follow the sequences: fork gives the new sequence copies of its source's
// selectors, and a selector never holds a token that truncate could take back. It indexes the body
// up to the last whole block before the tokens whose fp16 the policy's rollback keeps; the body
// tokens after that (fewer than rollback + block) are attended in full from their codes. With
// rollback=0 a sequence's selectors index what SelectionCache's index, and its answers have
// SelectionCache's bits.
//
//   kvsketch::PagedSelectionCache cache(32, 8, 128, KVPolicy::parse("tq_mse:b=3|rollback=8"),
//                                       "magicpig:K=10,L=150", /*dense_layers=*/{0, 16}, /*seed=*/1);
//   auto a = cache.add_sequence();
//   cache.append(a, layer, keys, values, tokens);     // as PagedKVCache::append
//   auto b = cache.fork(a);
//   cache.attention(layer, ids, batch, queries, q_heads, output, lse);   // one decode step
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kvsketch/paged_cache.hpp"
#include "kvsketch/sparse_attention.hpp"

// The library is built with hidden visibility: what this header declares is its exported API.
#pragma GCC visibility push(default)
namespace kvsketch {

class PagedSelectionCache {
 public:
  // Its rows are plain, unless KVSKETCH_PACKING asks otherwise (the selection reads scattered rows). Every
  // selector is a clone of make_selector(selector, head_dim, seed).
  PagedSelectionCache(size_t layers, size_t kv_heads, size_t head_dim, const KVPolicy& policy,
                      const std::string& selector, std::set<size_t> dense_layers = {}, uint64_t seed = 0);

  // As PagedKVCache's; a refused call changes nothing.
  SequenceId add_sequence();
  SequenceId fork(SequenceId source);
  void truncate(SequenceId sequence, size_t tokens);
  void remove_sequence(SequenceId sequence);
  void append(SequenceId sequence, size_t layer, const float* keys, const float* values, size_t tokens);

  // One decode step of a layer for a batch of sequences, buffers as PagedKVCache::decode's (lse may
  // be null). Dense layers through PagedKVCache::decode; the others through each sequence's
  // selectors. `draw` numbers the step for sampling selectors (the same draw as SelectionCache's
  // for the same layer and head). Sequences and query heads run in parallel on OpenMP's threads;
  // the answer has the same bits on any thread count.
  void attention(size_t layer, const SequenceId* sequences, size_t batch, const float* queries, size_t q_heads,
                 float* output, float* lse, uint64_t draw = 0) const;

  const PagedKVCache& cache() const { return cache_; }
  bool dense(size_t layer) const { return dense_layers_.count(layer) > 0; }
  const TokenSelector& selector(SequenceId sequence, size_t layer, size_t kv_head) const;
  // Body tokens of a sequence's layer that its selectors index (the rest of the body is attended
  // in full).
  size_t indexed_tokens(SequenceId sequence, size_t layer) const;
  // The selectors' indexes, over every sequence, layer and head (KV bytes: cache().bytes()), or
  // over one sequence's.
  size_t index_bytes() const;
  size_t index_bytes(SequenceId sequence) const;

 private:
  struct HeadSelector {
    std::unique_ptr<TokenSelector> selector;
    // Tokens past the sinks not yet in the selector, as the cache holds them (fp16, widened).
    std::vector<float> pending_keys, pending_values;
  };
  using Heads = std::vector<HeadSelector>;  // layer-major; no selector in dense layers
  const Heads& heads_of(SequenceId sequence, const char* operation) const;
  // Feeds every head of a sequence's layer the whole blocks that can no longer be taken back.
  void feed(SequenceId sequence, size_t layer, Heads& heads);

  PagedKVCache cache_;
  std::set<size_t> dense_layers_;
  std::unique_ptr<TokenSelector> prototype_;
  std::map<SequenceId, Heads> sequences_;
};

}  // namespace kvsketch
#pragma GCC visibility pop
