// Where a model's attention reads its past: the keys and values of one sequence, per layer. The
// runtime appends a chunk of keys and values to a layer and attends the chunk's queries causally
// over everything stored up to each query's own position.
//   CompressedKV   a sequence of a PagedKVCache: any kvsketch policy (codecs, splits, sinks, window,
//                  per-layer overrides), a chunk attended as ChunkAttention says, a decode step
//                  as the cache's decode
//   SelectedKV     a sequence of a PagedSelectionCache: a prompt chunk attended as CompressedKV
//                  attends it, each decoded token through the sequence's token selectors
//                  (MagicPIG, BalanceKV, top-k), as the sampling papers serve a model
//   ExactKV        float32 keys and values and exact softmax attention: the reference against
//                  which transformers' logits are checked
#pragma once
#include <cstddef>
#include <vector>

#include "kvsketch/attention.hpp"
#include "kvsketch/paged_cache.hpp"
#include "kvsketch/paged_selection_cache.hpp"

#pragma GCC visibility push(default)
namespace kvsketch::model {

// How a chunk of several tokens (a prompt's) attends itself:
//   kExactChunk    as engines run a chunked prefill (vLLM): the compressed past and the chunk's own
//                  keys and values exactly (PagedKVCache::attend_chunk), then appended
//   kThroughCache  as llama.cpp runs a batch: appended first and read back as the cache stores it
//                  (PagedKVCache::prefill), the chunk's tokens beyond the window compressed
enum class ChunkAttention { kExactChunk, kThroughCache };

class KVStore {
 public:
  virtual ~KVStore() = default;
  // Tokens stored in layer 0: the position of the next token.
  virtual size_t tokens() const = 0;
  // Appends `count` tokens to `layer` (keys and values [count][kv_heads][head_dim]) and writes the
  // attention of the chunk's queries ([count][q_heads][head_dim]) to output, query i attending to
  // every token up to position tokens()+i (before the append) inclusive.
  virtual void append_and_attend(size_t layer, const float* keys, const float* values, size_t count,
                                 const float* queries, size_t q_heads, float* output) = 0;
  // Bytes this sequence's cache holds, everything counted.
  virtual size_t bytes() const = 0;
};

// One sequence of a PagedKVCache (which must outlive it and have the model's layers, KV heads and
// head_dim). A new sequence is added unless one is given.
class CompressedKV final : public KVStore {
 public:
  explicit CompressedKV(PagedKVCache& cache, AttentionOptions options = {},
                        ChunkAttention chunks = ChunkAttention::kExactChunk);
  CompressedKV(PagedKVCache& cache, SequenceId sequence, AttentionOptions options = {},
               ChunkAttention chunks = ChunkAttention::kExactChunk);
  size_t tokens() const override;
  void append_and_attend(size_t layer, const float* keys, const float* values, size_t count, const float* queries,
                         size_t q_heads, float* output) override;
  size_t bytes() const override;
  SequenceId sequence() const { return sequence_; }
  PagedKVCache& cache() const { return cache_; }

  // One decode step of a layer for a batch of stores of one cache, one token each (keys and values
  // [batch][kv_heads][head_dim], queries and output [batch][q_heads][head_dim]): appended to each
  // sequence, then attended in one batched decode call with the first store's options. Each gets
  // the bits its append_and_attend of one token gives.
  static void append_and_attend_batch(CompressedKV* const* stores, size_t batch, size_t layer, const float* keys,
                                      const float* values, const float* queries, size_t q_heads, float* output);

 private:
  PagedKVCache& cache_;
  SequenceId sequence_;
  AttentionOptions options_;
  ChunkAttention chunks_;
  std::vector<float> keys_, values_;  // the chunk transposed to [kv_heads][count][head_dim]
};

// One sequence of a PagedSelectionCache (which must outlive it and have the model's shape). A chunk
// of several tokens is attended as CompressedKV attends it, densely; a chunk of one token (a decode
// step) through the selectors, its position numbering the draw of the sampling selectors. A new
// sequence is added.
class SelectedKV final : public KVStore {
 public:
  explicit SelectedKV(PagedSelectionCache& cache, ChunkAttention chunks = ChunkAttention::kExactChunk);
  size_t tokens() const override;
  void append_and_attend(size_t layer, const float* keys, const float* values, size_t count, const float* queries,
                         size_t q_heads, float* output) override;
  // The sequence's cache bytes and its selectors' indexes.
  size_t bytes() const override;
  SequenceId sequence() const { return sequence_; }

 private:
  PagedSelectionCache& cache_;
  SequenceId sequence_;
  ChunkAttention chunks_;
  std::vector<float> keys_, values_;  // the chunk transposed to [kv_heads][count][head_dim]
};

class ExactKV final : public KVStore {
 public:
  ExactKV(size_t layers, size_t kv_heads, size_t head_dim);
  size_t tokens() const override;
  void append_and_attend(size_t layer, const float* keys, const float* values, size_t count, const float* queries,
                         size_t q_heads, float* output) override;
  size_t bytes() const override;

 private:
  size_t kv_heads_, head_dim_;
  std::vector<std::vector<float>> keys_, values_;  // per layer: [token][kv_heads][head_dim]
};

}  // namespace kvsketch::model
#pragma GCC visibility pop
