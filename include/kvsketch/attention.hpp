// Decode attention over a KVCache: exact over the fp16 sinks and recent window, straight from the
// codes over the compressed body (keys scored against the query rotated or sketched once, values
// summed in the rotated domain and un-rotated once), merged by log-sum-exp. Results carry the
// log-sum-exp, so partial results over token ranges, threads or other token sets merge exactly.
//
//   AttentionResult r = decode_attention(cache, layer, kv_head, queries, 4);  // 4 query heads
//   r.output[h * head_dim + j], r.lse[h]
#pragma once
#include <cstddef>
#include <vector>

#include "kvsketch/executor.hpp"
#include "kvsketch/kv_cache.hpp"

// The library is built with hidden visibility: what this header declares is its exported API.
#pragma GCC visibility push(default)
namespace kvsketch {

struct AttentionResult {
  size_t heads = 0, dim = 0;
  std::vector<float> output;  // heads x dim: softmax(q K^T / sqrt(dim)) V
  std::vector<float> lse;     // heads: log sum_i exp(q k_i / sqrt(dim)); -inf over no tokens
};

// Combines the attention over two disjoint token sets into the attention over their union.
void merge_attention(AttentionResult& into, const AttentionResult& other);

// The same on caller buffers, the pair vLLM's merge_attn_states and FlashInfer's merge_state take:
// partial results a and b (outputs [heads][dim], lse [heads]; -inf for no tokens) into output and
// lse, which may be a's or b's buffers.
void merge_attention_states(const float* output_a, const float* lse_a, const float* output_b, const float* lse_b,
                            size_t heads, size_t dim, float* output, float* lse);

// The heads of `parts` (same dim), one after another, as one result.
AttentionResult concat_attention(const std::vector<AttentionResult>& parts);

struct AttentionOptions {
  int threads = 0;                 // 0: all OpenMP threads (where no executor is given)
  Executor* executor = nullptr;    // runs the step's tasks (executor.hpp); null: OpenMP with `threads`
  // The body is split in ranges of at most this many tokens that run in parallel (two ranges where
  // it would fit one and has 2048 or more). Not the thread count: it sets how partial sums merge,
  // so the same options give the same bits on any number of threads.
  size_t tokens_per_task = 8192;
  Arithmetic arithmetic = Arithmetic::kInteger;  // of the body's kernels (codec.hpp)
};

// The query heads of one GQA group: queries are heads x head_dim floats.
AttentionResult decode_attention(const KVCache& cache, size_t layer, size_t kv_head, const float* queries,
                                 size_t heads, const AttentionOptions& options = {});

// All query heads of a layer: q_heads x head_dim, q_heads a multiple of kv_heads; query head h
// reads kv head h / (q_heads / kv_heads) (MHA, GQA and MQA alike). Parallel over KV heads and their
// token ranges together; each group gets the bits decode_attention gives it.
AttentionResult decode_attention_layer(const KVCache& cache, size_t layer, const float* queries, size_t q_heads,
                                       const AttentionOptions& options = {});

// The scores q k_i / sqrt(dim) that decode_attention uses, for every token in order (sinks,
// body, window): heads x tokens.
std::vector<float> decode_logits(const KVCache& cache, size_t layer, size_t kv_head, const float* queries,
                                 size_t heads);

// Exact attention in fp32 over n float rows (the reference for tests and metrics).
AttentionResult reference_attention(const float* queries, size_t heads, const float* keys, const float* values,
                                    size_t n, size_t dim);

}  // namespace kvsketch
#pragma GCC visibility pop
