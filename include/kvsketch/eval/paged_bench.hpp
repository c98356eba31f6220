// The batched decode benchmark behind `kvsketch bench attention --batch B`: per policy, a
// PagedKVCache holding B sequences per layer (context lengths cycled from `contexts`), repeated
// over enough layers to be read from memory (bench_timing.hpp's cold bytes), and timed three ways
// in turn within each pass:
//   batch   one PagedKVCache::decode call for the B sequences of a layer
//   single  B calls, one sequence each
//   kv      (B = 1 only) decode_attention_layer over a KVCache holding the same tokens
// with the median over passes of each and of the ratios of paired times. Fork: the time to fork a
// sequence of the first context against the time to append its tokens again (one layer).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvsketch {

struct PagedBenchConfig {
  std::vector<std::string> policies;
  std::vector<size_t> contexts;  // tokens of the batch's sequences, cycled
  size_t batch = 16;
  std::vector<int> threads;
  size_t head_dim = 128, query_heads = 4, kv_heads = 1;
  int repetitions = 5;
  uint64_t seed = 1;
  size_t layers = 0;  // 0: enough for the cold bytes
};

struct PagedBenchRow {
  std::string policy;
  size_t batch = 0, layers = 0, tokens = 0;  // tokens: of all sequences of a layer
  int threads = 0;
  size_t bytes = 0;                    // one layer's cache, everything counted
  double batch_ns = 0.0;               // median time of one batched decode of a layer
  double single_ns = 0.0;              // median time of the B single-sequence decodes of a layer
  double batch_speedup = 0.0;          // median over passes of single_ns / batch_ns
  double kv_cache_ns = 0.0;            // B = 1: KVCache's step over the same tokens (else 0)
  double paged_vs_kv_cache = 0.0;      // B = 1: median of batch_ns / kv_cache_ns (else 0)
  double fork_ns = 0.0, append_ns = 0.0;  // one layer's sequence of contexts[0] tokens
};

std::vector<PagedBenchRow> bench_paged_attention(const PagedBenchConfig& config);

}  // namespace kvsketch
