// Attention from a weighted subset of the tokens (MagicPIG, top-k, sampling baselines): a
// selector picks body tokens and a log weight for each, and one kernel computes
// softmax(q k_i / sqrt(d) + log w_i) v_i over them, returning the output and the log-sum-exp so
// that it merges with the exact sinks and recent window (merge_attention).
//
//   auto selector = kvsketch::make_selector("magicpig:K=10,L=150", 128, /*seed=*/1);
//   selector->append(keys, values, n);                  // prefill, then decoded tokens
//   TokenSelection s = selector->select(q, body, 0);    // body: the keys and values it indexes
//   AttentionResult part = weighted_attention(q, body, s);
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvsketch/attention.hpp"

// The library is built with hidden visibility: what this header declares is its exported API.
#pragma GCC visibility push(default)
namespace kvsketch {

// The tokens a selector indexes: rows [0, tokens) of dim values. Keys and values are each stored
// one way: floats (keys, values), fp16 (half_keys, half_values: IEEE binary16 bits) or a codec's
// rows (key_codec with key_codes, value_codec with value_codes: read straight from the codes, keys
// scored against the query prepared once, values summed in the codec's domain and turned back once).
struct BodyView {
  const float* keys = nullptr;
  const float* values = nullptr;
  size_t tokens = 0, dim = 0;
  const uint16_t* half_keys = nullptr;
  const uint16_t* half_values = nullptr;
  const VectorCodec* key_codec = nullptr;
  const CodeBuffer* key_codes = nullptr;
  const VectorCodec* value_codec = nullptr;
  const CodeBuffer* value_codes = nullptr;
  // Or codes in pages (a PagedKVCache sequence's body), with key_codec and value_codec: row r is
  // row (first_row + r) % page_rows of key_pages[(first_row + r) / page_rows], values alike.
  const CodeBuffer* const* key_pages = nullptr;
  const CodeBuffer* const* value_pages = nullptr;
  size_t page_rows = 0, first_row = 0;

  static BodyView half(const uint16_t* keys, const uint16_t* values, size_t tokens, size_t dim) {
    return {nullptr, nullptr, tokens, dim, keys, values};
  }
  // Codes of two codecs (rows that stand alone: row_group() == 1), as many rows each.
  static BodyView compressed(const VectorCodec& key_codec, const CodeBuffer& keys, const VectorCodec& value_codec,
                             const CodeBuffer& values);
  // The compressed body of one layer and KV head of a cache: its tokens sinks .. sinks + body_count.
  static BodyView of(const KVCache& cache, size_t layer, size_t kv_head);
  // Rows [first_row, first_row + tokens) of pages of page_rows rows each.
  static BodyView paged(const VectorCodec& key_codec, const CodeBuffer* const* key_pages,
                        const VectorCodec& value_codec, const CodeBuffer* const* value_pages, size_t page_rows,
                        size_t first_row, size_t tokens);
};

struct TokenSelection {
  std::vector<uint32_t> tokens;      // ascending body rows
  std::vector<float> log_weights;    // one per token, added to its logit
  // Optional: q . k_i per token, when the selector computed them for this query (MagicPIG does,
  // for u_i); weighted_attention then reads no key again.
  std::vector<float> scores;
  // BalanceKV's paper mode: the denominator (the softmax normalizer) is estimated from its own
  // subset and weights; the tokens above then only form the numerator.
  bool separate_denominator = false;
  std::vector<uint32_t> denominator_tokens;
  std::vector<float> denominator_log_weights;
};

// One query head: softmax over the selection of q k_i / sqrt(dim) + log_weights_i, times v_i.
// An empty selection gives lse = -inf and a zero output (it merges as nothing).
AttentionResult weighted_attention(const float* query, const BodyView& body, const TokenSelection& selection);

// Attention over every token of a body (the exact sinks and window of a SelectionCache).
AttentionResult dense_attention(const float* query, const BodyView& body);

class TokenSelector {
 public:
  virtual ~TokenSelector() = default;
  // Canonical spec, every parameter spelled out.
  virtual std::string spec() const = 0;
  // Body tokens arrive in order (n x dim keys and values): the prefill, then one decoded token at
  // a time. Never rebuilds.
  virtual void append(const float* keys, const float* values, size_t n) = 0;
  virtual size_t tokens() const = 0;
  // The tokens to read for one query head, and their log weights. `draw` numbers the call, for
  // selectors that sample: the same (seed, draw) gives the same selection.
  virtual TokenSelection select(const float* query, const BodyView& body, uint64_t draw) const = 0;
  // Bytes of the selector's own index (hash codes, tables); 0 for the oracle baselines.
  virtual size_t index_bytes() const { return 0; }
  // An independent copy (for another head or layer indexing the same tokens).
  virtual std::unique_ptr<TokenSelector> clone() const = 0;
};

// Specs: exact | window (no body token: sinks + recent window alone) | topk:budget=F (oracle top
// fraction F of the body by exact score) | uniform:budget=F (F of the body uniformly without
// replacement, weight body/|S|) | oracle:budget=F (F x body draws i.i.d. from the exact softmax,
// Eq. 5) | magicpig:K=..,L=..[,hits=2][,center=1]. Errors name the parameter and its range.
std::unique_ptr<TokenSelector> make_selector(const std::string& spec, size_t dim, uint64_t seed = 0);

}  // namespace kvsketch
#pragma GCC visibility pop
