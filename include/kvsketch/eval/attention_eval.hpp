// Fidelity of cache policies at equal bytes: for each policy, a one-head cache is filled with the
// given keys and values (one prefill block) and every query is answered by decode_attention; the
// answers are compared with exact fp32 attention over the original keys and values.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kvsketch/kv_cache.hpp"

namespace kvsketch {

struct AttentionCase {
  std::string name;  // regime or file name
  size_t tokens = 0, dim = 0, queries = 0;
  std::vector<float> keys, values, query_rows;  // tokens x dim, tokens x dim, queries x dim
};

struct AttentionEvalRow {
  std::string policy, regime;
  size_t tokens = 0;
  double bits_per_value = 0;  // everything stored: codes, norms, sinks and window in fp16
  size_t bytes = 0;
  double rel_error = 0;       // mean over queries of ||out - exact|| / ||exact||
  double kl = 0;              // mean KL(softmax exact || softmax approximate)
  double top8_overlap = 0;    // mean |top8 exact ∩ top8 approximate| / 8
  // Mean of (approximate - exact) logits over the compressed body, and its standard error across
  // the queries. For one codec draw: it says whether this draw's scores are offset, not whether the
  // codec is biased over draws (that needs several seeds; `kvsketch distortion --codec-seeds`).
  double score_error_mean = 0;
  double score_error_stderr_queries = 0;
  double ns_per_query = 0;    // decode_attention time per query, the median of the repetitions
  double ns_spread = 0;       // (75th - 25th percentile) / median of those times
};

// One query's rel_error: ||approximate - exact|| / ||exact|| over d outputs, in double; 0 where
// both are zero (values all zero), and huge, not NaN, where only the exact output is.
double output_relative_error(const float* approximate, const float* exact, size_t d);

// The policies of the standard comparison (fp16, int8, KIVI-style, TurboQuant, QJL).
std::vector<std::string> standard_policies();

// Times decode_attention `timing_repetitions` times on `threads` threads (0: all; one by default,
// as a busy machine's other threads make a many-thread step slower and noisier than one thread).
AttentionEvalRow evaluate_policy(const std::string& policy, const AttentionCase& data, uint64_t seed,
                                 int timing_repetitions = 21, int threads = 1);

// The one-layer, one-head cache evaluate_policy measures: data's keys and values under policy.
KVCache build_policy_cache(const std::string& policy, const AttentionCase& data, uint64_t seed);
// The same measurements over a cache built elsewhere (a loaded file, for instance): it must hold
// exactly data's tokens in one layer and one KV head. The row's policy is the cache's canonical one.
AttentionEvalRow evaluate_cache(const KVCache& cache, const AttentionCase& data, int timing_repetitions = 21,
                                int threads = 1);

}  // namespace kvsketch
