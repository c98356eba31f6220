// PagedKVCache: the key/value cache of a model serving many sequences, as an inference engine keeps
// it. Per layer, each sequence holds
//   sinks   its first `sinks` tokens, fp16
//   body    its encoded tokens, in pages of `page` tokens (KVPolicy): a page fills as tokens leave
//           the window, is sealed when full and is immutable from then on, shared by every
//           sequence forked from it (copy-on-write) and counted once
//   window  its most recent tokens, fp16 (and, with rollback=N, the fp16 of the last N encoded
//           tokens, kept so that truncate can re-open them)
// All sequences share the codecs of each layer and KV head, and their Calibration (the outlier
// channels, centring means or PCA basis of codecs fitted to data): pass a fitted Calibration, or
// let the cache fit each layer on the first sequence that encodes it (its first sinks + window +
// block tokens, as KVCache does).
//
//   kvsketch::PagedKVCache cache(32, 8, 128, kvsketch::KVPolicy::parse("tq_mse:b=3|rollback=8"), 1);
//   auto a = cache.add_sequence();
//   cache.append(a, layer, keys, values, tokens);      // [kv_heads][tokens][head_dim] floats each
//   auto b = cache.fork(a);                            // shares a's sealed pages
//   cache.decode(layer, ids, batch, queries, q_heads, output, lse);   // one step for a batch
//   cache.truncate(b, cache.tokens(b, 0) - 3);         // roll back 3 tokens
//   cache.attend_chunk(layer, a, 512, chunk_queries, q_heads, chunk_keys, chunk_values, output, lse);
//   cache.append(a, layer, chunk_keys, chunk_values, 512);   // a prompt chunk: attended, then kept
//
// One sequence's appends give the bytes a KVCache with the same policy and seed holds: the same
// codes, sinks and window. Its decode cuts the body at page boundaries, where KVCache cuts it into
// token ranges: the same bits where one page holds the body, else float sums that differ in the
// last bits (and, in the integer kernels, weights rounded per block from a different start).
// Mutations (add, fork, append, truncate,
// remove) must not run concurrently with anything else on the cache; decode is const and may run
// beside other decodes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kvsketch/attention.hpp"
#include "kvsketch/calibration.hpp"
#include "kvsketch/codec.hpp"
#include "kvsketch/kv_policy.hpp"

// The library is built with hidden visibility: what this header declares is its exported API.
#pragma GCC visibility push(default)
namespace kvsketch {

using SequenceId = uint64_t;

// Tokens [first, first + count) of a sequence, in token order (sinks, encoded body, window).
struct TokenRange {
  size_t first = 0, count = 0;
};

class PagedKVCache {
 public:
  // An empty cache; the shape's limits are KVCache's. The second form starts from a calibration,
  // whose shape, policy and seed it takes; its unfitted layers are fitted as sequences reach them.
  PagedKVCache(size_t layers, size_t kv_heads, size_t head_dim, const KVPolicy& policy, uint64_t seed = 0);
  explicit PagedKVCache(Calibration calibration);
  ~PagedKVCache();
  PagedKVCache(PagedKVCache&&) noexcept;
  PagedKVCache& operator=(PagedKVCache&&) noexcept;

  size_t layers() const;
  size_t kv_heads() const;
  size_t head_dim() const;
  const KVPolicy& policy() const;
  uint64_t seed() const;
  const Calibration& calibration() const;
  const VectorCodec& key_codec(size_t layer, size_t kv_head) const;
  const VectorCodec& value_codec(size_t layer, size_t kv_head) const;

  // Sequences. Ids are never reused. fork copies a sequence: the new one shares every sealed page
  // and copies the unsealed one, the sinks and the window. truncate keeps the first `tokens` tokens
  // of every layer, as if the rest had never been appended (appending the same tokens again gives
  // the same bytes); tokens that left the window can be re-opened only as far as rollback keeps
  // their fp16, and a truncate beyond that is refused, naming how far it can go.
  SequenceId add_sequence();
  SequenceId fork(SequenceId source);
  void truncate(SequenceId sequence, size_t tokens);
  void remove_sequence(SequenceId sequence);
  bool contains(SequenceId sequence) const;
  std::vector<SequenceId> sequences() const;  // in increasing order

  // Appends `tokens` tokens to one layer of a sequence: keys and values are
  // [kv_heads][tokens][head_dim]. NaN, Inf or values beyond fp16 are refused naming layer, head,
  // token and channel; a refused append leaves the cache unchanged.
  void append(SequenceId sequence, size_t layer, const float* keys, const float* values, size_t tokens);
  size_t tokens(SequenceId sequence, size_t layer) const;
  // Tokens [first, first + count) of a sequence's layer as the cache holds them: fp16 sinks and
  // window widened, body rows decoded by their codecs. keys and values are the caller's
  // [kv_heads][count][head_dim] floats. Attention from the codes equals attention over these rows
  // up to float rounding (what a user compares against, or hands to code that wants plain rows).
  void read(SequenceId sequence, size_t layer, size_t first, size_t count, float* keys, float* values) const;

  // One decode step of a layer for a batch of sequences of any lengths: queries are
  // [batch][q_heads][head_dim] floats, q_heads a multiple of kv_heads (query head h reads kv head
  // h / (q_heads / kv_heads)); output ([batch][q_heads][head_dim]) and lse ([batch][q_heads], may
  // be null) are the caller's. Each sequence's answer has the bits it has decoded alone, on any
  // executor or thread count. A sequence may appear more than once. Once warm (a call of the same
  // batch and shape made before), a call allocates no heap memory, whichever threads run its tasks:
  // the cache keeps the steps' memory, the kernels' scratch included, in a pool. (fp16, tq_mse,
  // tq_prod and the split widths are tested; other codecs may still allocate their prepared
  // queries, and the float kernels of channel splits take temporaries from per-thread free lists
  // that a thread fills on its first call.)
  void decode(size_t layer, const SequenceId* sequences, size_t batch, const float* queries, size_t q_heads,
              float* output, float* lse, const AttentionOptions& options = {}) const;

  // Chunked prefill: the last `chunk` tokens of a sequence's layer (appended already) as queries,
  // each attending causally to every token up to and including its own, the compressed past and
  // the chunk alike, through the decode kernels: queries [chunk][q_heads][head_dim], output the
  // same, lse [chunk][q_heads] (may be null). The chunk's last position gives decode's bits.
  void prefill(size_t layer, SequenceId sequence, size_t chunk, const float* queries, size_t q_heads, float* output,
               float* lse, const AttentionOptions& options = {}) const;

  // Chunked prefill as engines run it (vLLM's chunked prefill, FlashAttention over the new tokens):
  // called before the chunk is appended, each query attends the sequence's tokens as the cache
  // holds them (sinks, codes, window) and the chunk's own keys and values exactly, as fp16, query i
  // the chunk's tokens 0..i. keys and values in append's layout ([kv_heads][chunk][head_dim]);
  // append them afterwards. Every query thus reads at least the window's recent tokens in fp16,
  // where prefill() gives the first queries of a chunk longer than the window their own neighbours
  // compressed. Same arguments otherwise as prefill(); bad keys or values (NaN, Inf, beyond fp16)
  // are refused as append refuses them.
  void attend_chunk(size_t layer, SequenceId sequence, size_t chunk, const float* queries, size_t q_heads,
                    const float* keys, const float* values, float* output, float* lse,
                    const AttentionOptions& options = {}) const;

  // Plan, run, merge: a decode step split by token ranges, so that parts of a long sequence can run
  // elsewhere (other threads, devices, machines) and merge exactly. plan() gives the ranges of
  // decode's own tasks for a sequence (sinks, window halves, runs of pages), which cover its tokens
  // once; decode_range() the attention over one range of tokens as a partial result, output and lse
  // as decode's; merge_attention_states (attention.hpp) combines two partial results. Ranges
  // that start or end inside a row group the codec reads only whole (quads, KIVI) read those rows
  // decoded.
  std::vector<TokenRange> plan(size_t layer, SequenceId sequence, const AttentionOptions& options = {}) const;
  void decode_range(size_t layer, SequenceId sequence, TokenRange range, const float* queries, size_t q_heads,
                    float* output, float* lse, const AttentionOptions& options = {}) const;

  // Versioned files with a checksum: the whole cache (its calibration, every page once however many
  // sequences share it, every sequence under its id), or one sequence (its pages and fp16 rows, and
  // the calibration it was encoded under), loaded into a cache of the same shape, policy and seed
  // whose calibration agrees on every layer the sequence encoded, as a new sequence. Truncated,
  // corrupted or inconsistent files, and files of another shape, policy, seed or calibration, are
  // refused with an error naming the file and what is wrong.
  void save(const std::string& path) const;
  static PagedKVCache load(const std::string& path);
  void save_sequence(SequenceId sequence, const std::string& path) const;
  SequenceId load_sequence(const std::string& path);

  // Bytes held: every page once however many sequences share it, every sequence's fp16 sinks and
  // window, and the calibration. sequence_bytes counts one sequence's pages (shared or not) and
  // fp16 parts; pages() the distinct pages of all layers. allocated_bytes() counts capacity.
  size_t bytes() const;
  size_t sequence_bytes(SequenceId sequence) const;
  size_t pages() const;
  size_t allocated_bytes() const;

 private:
  friend class PagedSelectionCache;  // reads the pages and fp16 rows it attends
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kvsketch
#pragma GCC visibility pop
