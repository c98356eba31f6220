// The speed benchmark behind `kvsketch bench sparse`: one query head over a long-tailed synthetic
// cache of `tokens` tokens held in fp16, 4 exact sinks and 64 exact recent tokens, one thread. Per selector:
// the time of one decode step (query hashing or selection, bucket look-up, the weighted attention
// over the selected body tokens and the exact sinks and window, the merge), next to dense fp16
// attention over the same tokens in the same run; the insertion cost of a decoded token; the
// prefill (block append) rate. As in bench attention, the data is repeated over enough copies
// (layers) to be twice the last-level cache (at most 256 MiB), queried in turn.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvsketch {

struct SparseBenchConfig {
  std::vector<std::string> methods;  // selector specs; empty: MagicPIG's three settings, BalanceKV 1/4 and 1/16
  size_t tokens = 65536, head_dim = 128;
  size_t decode_tokens = 4096;       // the last tokens appended one at a time (insertion cost)
  int repetitions = 5;
  uint64_t seed = 1;
};

struct SparseBenchRow {
  std::string method;
  size_t tokens = 0, layers = 0;
  double budget = 0;                    // mean fraction of body tokens read per query
  double index_bytes_per_token = 0;     // the selector's index over the body, per body token
  double ns_per_query = 0;              // median decode step, one query head, one thread
  double fp16_ns_per_query = 0;         // dense fp16 attention over the same tokens, same run
  double fraction_of_fp16 = 0;          // ns_per_query / fp16_ns_per_query
  double prefill_tokens_per_s = 0;      // block append of the body less its last decode_tokens
  double insert_us_per_token = 0;       // then one token per append (amortized: block closes, halvings)
};

std::vector<SparseBenchRow> bench_sparse(const SparseBenchConfig& config);

}  // namespace kvsketch
