// The decode-attention speed benchmark behind `kvsketch bench attention`: one layer's decode step
// over a cache of `tokens` tokens (decode_attention_layer): kv_heads GQA groups of query_heads
// query heads each, by default one group. Each policy's
// cache is repeated over enough layers that they are at least twice the last-level cache (capped at
// 256 MiB: VMs report host caches of 500 MiB and more), and the
// layers are queried in turn, as a decoder does: every step reads its bytes from memory, not from
// a cache level that a single small head would fit in.
// The policies are timed in turn within each pass (bench::interleaved_ns_per_copy), so that a
// phase of a noisy machine's speed falls on all of them alike.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvsketch {

struct AttentionBenchConfig {
  std::vector<std::string> policies;
  std::vector<size_t> tokens;
  std::vector<int> threads;
  size_t head_dim = 128, query_heads = 4;  // query heads per KV head
  size_t kv_heads = 1;  // above 1: the whole layer's step; every KV head holds the same tokens
  int repetitions = 5;
  uint64_t seed = 1;
  size_t layers = 0;  // 0: per policy, enough that its copies are twice the last-level cache (<= 256 MiB)
};

struct AttentionBenchRow {
  std::string policy;
  size_t tokens = 0, layers = 0;
  int threads = 0;
  double bits_per_value = 0.0;
  size_t bytes = 0;               // one layer's cache (all its KV heads), everything counted
  double ns_per_query = 0.0;      // median time of one decode step of the layer (all its query heads)
  double gbytes_per_s = 0.0;      // bytes / ns_per_query
  double speedup_vs_fp16 = 0.0;   // median over passes of fp16's time over this one's in the same pass
  double memory_gbytes_per_s = 0.0;  // read bandwidth measured in the same run, same threads
  double bandwidth_fraction = 0.0;   // gbytes_per_s / memory_gbytes_per_s
  // The process's memory on transparent huge pages once the caches were built (0: every row on 4
  // KiB pages). With 2 MiB pages both stream faster, fp16 more in most runs (docs/RESULTS.md).
  size_t huge_page_bytes = 0;
  // How the body's rows lie (kv_policy.hpp's layout, as auto resolved it on this CPU): "plain",
  // "quads", or "keys in quads" / "values in quads".
  std::string rows;
  // The passes' interquartile range over their median: how steady the machine was. A row is
  // unstable where it exceeds kUnstableSpread, or where the step read faster than the bandwidth
  // probe allows (the probe then ran in a slow phase): its figures are not to be trusted alone.
  double spread = 0.0;
  bool unstable = false;
  size_t peak_memory_bytes = 0;  // the process's peak resident memory once the row was measured
};

inline constexpr double kUnstableSpread = 0.10;

struct AppendBenchRow {
  std::string policy;
  size_t tokens = 0;
  double prefill_tokens_per_s = 0.0;  // one block append, per KV head, one thread
  double decode_tokens_per_s = 0.0;   // one token per append, per KV head, one thread
  double paged_prefill_tokens_per_s = 0.0;  // the same into a PagedKVCache sequence (fixed blocks)
  double paged_decode_tokens_per_s = 0.0;
  // The memory-copy reference: the input keys and values (floats) copied into a fresh buffer.
  double copy_tokens_per_s = 0.0;
};

// Read bandwidth of memory, GB/s: `threads` threads summing a buffer of `bytes` bytes; best of
// `repetitions`.
double measure_read_bandwidth(size_t bytes, int threads, int repetitions = 5);

// Size of the last-level cache in bytes (32 MiB when the system does not say).
size_t last_level_cache_bytes();

std::vector<AttentionBenchRow> bench_attention(const AttentionBenchConfig& config);
std::vector<AppendBenchRow> bench_append(const std::vector<std::string>& policies, size_t tokens, size_t head_dim,
                                         uint64_t seed);

}  // namespace kvsketch
