#include "kvsketch/eval/attention_bench.hpp"

#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>

#include "cache/row_packing.hpp"
#include "core/huge_pages.hpp"
#include "core/team_size.hpp"
#include "eval/bench_timing.hpp"
#include "kvsketch/attention.hpp"
#include "core/require.hpp"
#include "kvsketch/kv_cache.hpp"
#include "kvsketch/paged_cache.hpp"
#include "kvsketch/eval/synthetic_cache.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {
namespace {

using bench::Clock;
using bench::median;
using bench::seconds_since;

// AttentionBenchRow::rows of a cache, from its first layer and head.
std::string body_rows(const KVCache& cache) {
  const bool keys = rows_in_quads(cache.key_codec(0, 0)), values = rows_in_quads(cache.value_codec(0, 0));
  if (keys == values) return keys ? "quads" : "plain";
  return keys ? "keys in quads" : "values in quads";
}

}  // namespace

size_t bench::peak_memory_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<size_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

size_t last_level_cache_bytes() {
  long size = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (size <= 0) size = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return size > 0 ? static_cast<size_t>(size) : size_t{32} << 20;
}

double measure_read_bandwidth(size_t bytes, int threads, int repetitions) {
  check_threads(threads, "bandwidth probe");
  const size_t n = bytes / sizeof(float);
  std::vector<float> buffer(n);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (long i = 0; i < static_cast<long>(n); ++i) buffer[i] = static_cast<float>(i & 1023) * 1e-3f;
  double best = 0.0;
  volatile float sink = 0.0f;
  for (int r = 0; r < repetitions; ++r) {
    const auto start = Clock::now();
    float total = 0.0f;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      const size_t parts = static_cast<size_t>(omp_get_num_threads()), part = static_cast<size_t>(omp_get_thread_num());
      const size_t first = n * part / parts, last = n * (part + 1) / parts;
      total += simd::streamed_sum(buffer.data() + first, last - first);
    }
    best = std::max(best, static_cast<double>(bytes) / seconds_since(start) / 1e9);
    sink = sink + total;
  }
  return best;
}

// Every policy parsed before any work, so that a bad one late in the list is refused at once.
std::vector<KVPolicy> parse_policies(const std::vector<std::string>& policies) {
  std::vector<KVPolicy> parsed;
  for (const std::string& policy : policies) parsed.push_back(KVPolicy::parse(policy));
  return parsed;
}

// One KV head's bytes under `policy` for the first `tokens` tokens of `data`.
size_t head_bytes(const KVPolicy& policy, const SyntheticCache& data, size_t tokens, uint64_t seed) {
  KVCache probe(1, 1, data.dim, policy, seed);
  probe.append(0, data.keys.data(), data.values.data(), tokens);
  probe.shrink_to_fit();
  return probe.bytes(0);
}

// The first `tokens` tokens of `data` appended to every KV head of `layer` (tokens x kv_heads x dim
// rows), in chunks that keep the interleaved copy small: a streamed append gives the same codes.
void append_to_every_head(KVCache& cache, size_t layer, const SyntheticCache& data, size_t tokens) {
  const size_t kv_heads = cache.kv_heads(), dim = data.dim;
  if (kv_heads == 1) return cache.append(layer, data.keys.data(), data.values.data(), tokens);
  constexpr size_t kChunk = 2048;
  std::vector<float> keys(kChunk * kv_heads * dim), values(keys.size());
  for (size_t first = 0; first < tokens; first += kChunk) {
    const size_t count = std::min(kChunk, tokens - first);
    for (size_t i = 0; i < count; ++i)
      for (size_t g = 0; g < kv_heads; ++g) {
        std::copy_n(data.keys.data() + (first + i) * dim, dim, keys.data() + (i * kv_heads + g) * dim);
        std::copy_n(data.values.data() + (first + i) * dim, dim, values.data() + (i * kv_heads + g) * dim);
      }
    cache.append(layer, keys.data(), values.data(), count);
  }
}

std::vector<AttentionBenchRow> bench_attention(const AttentionBenchConfig& config) {
  require(!config.policies.empty() && !config.tokens.empty() && !config.threads.empty(),
          "bench attention: policies, tokens and threads must not be empty");
  const std::vector<KVPolicy> policies = parse_policies(config.policies);
  require(config.kv_heads >= 1, "bench attention: kv_heads must be at least 1");
  for (const int threads : config.threads) {
    check_threads(threads, "bench attention");
    require(threads >= 1, "bench attention: thread counts must be at least 1, got 0");
  }
  const size_t d = config.head_dim, heads = config.query_heads, kv_heads = config.kv_heads;
  const size_t most = *std::max_element(config.tokens.begin(), config.tokens.end());
  // One long-tailed cache; shorter contexts are its prefixes.
  const SyntheticCache data = make_synthetic_cache("long-tailed", most, d, heads, config.seed);
  std::vector<float> queries;  // each KV head's group asks the same queries
  for (size_t g = 0; g < kv_heads; ++g) queries.insert(queries.end(), data.query_rows.begin(), data.query_rows.end());
  std::vector<double> bandwidth;
  for (int threads : config.threads) bandwidth.push_back(measure_read_bandwidth(4 * last_level_cache_bytes(), threads));

  std::vector<AttentionBenchRow> rows;
  for (size_t tokens : config.tokens) {
    require(tokens >= 1 && tokens <= most, "bench attention: bad token count {}", tokens);
    // Every policy's cache first, then the policies timed in turn within each pass, so that the
    // speed-ups compare passes run in the same phase of the machine. Each policy has enough layers
    // of its own bytes to exceed the last-level cache: with fp16's count, a compressed cache of a
    // few bits per value would fit there (16k tokens on a 32 MB L3) and be read from it.
    std::vector<KVCache> caches;
    std::vector<size_t> layers;
    for (const KVPolicy& parsed : policies) {
      if (config.layers == 0) {
        layers.push_back(bench::copies_beyond_cache(kv_heads * head_bytes(parsed, data, tokens, config.seed)));
      } else {
        layers.push_back(config.layers);
      }
      KVCache& cache = caches.emplace_back(layers.back(), kv_heads, d, parsed, config.seed);
      for (size_t layer = 0; layer < layers.back(); ++layer) append_to_every_head(cache, layer, data, tokens);
      cache.shrink_to_fit();
    }
    const size_t huge_page_bytes = huge_page_bytes_in_use();
    const auto fp16 = std::find(config.policies.begin(), config.policies.end(), "fp16");
    for (size_t t = 0; t < config.threads.size(); ++t) {
      AttentionOptions options;
      options.threads = config.threads[t];
      const auto times = bench::interleaved_ns_per_copy(layers, config.repetitions,
                                                        [&](size_t policy, size_t layer, size_t) {
                                                          decode_attention_layer(caches[policy], layer,
                                                                                 queries.data(), kv_heads * heads,
                                                                                 options);
                                                        });
      for (size_t p = 0; p < caches.size(); ++p) {
        AttentionBenchRow row;
        row.policy = config.policies[p];
        row.tokens = tokens;
        row.layers = layers[p];
        row.threads = config.threads[t];
        row.bits_per_value = caches[p].bits_per_value();
        row.bytes = caches[p].bytes(0);
        row.ns_per_query = median(times[p]);
        row.gbytes_per_s = static_cast<double>(row.bytes) / row.ns_per_query;
        row.memory_gbytes_per_s = bandwidth[t];
        row.bandwidth_fraction = row.gbytes_per_s / bandwidth[t];
        row.huge_page_bytes = huge_page_bytes;
        row.rows = body_rows(caches[p]);
        if (fp16 != config.policies.end())
          row.speedup_vs_fp16 = bench::median_ratio(times[fp16 - config.policies.begin()], times[p]);
        row.spread = bench::relative_spread(times[p]);
        row.unstable = row.spread > kUnstableSpread || row.bandwidth_fraction > 1.05;
        row.peak_memory_bytes = bench::peak_memory_bytes();
        rows.push_back(row);
      }
    }
  }
  return rows;
}

std::vector<AppendBenchRow> bench_append(const std::vector<std::string>& policies, size_t tokens, size_t head_dim,
                                         uint64_t seed) {
  const std::vector<KVPolicy> parsed_policies = parse_policies(policies);
  const SyntheticCache data = make_synthetic_cache("long-tailed", tokens, head_dim, 1, seed);
  // Per core: encoding would otherwise spread a block append over every thread.
  const int previous_threads = omp_get_max_threads();
  omp_set_num_threads(1);
  std::vector<AppendBenchRow> rows;
  for (size_t p = 0; p < policies.size(); ++p) {
    AppendBenchRow row{policies[p], tokens};
    const KVPolicy& parsed = parsed_policies[p];
    std::vector<double> prefill, decode, paged_prefill, paged_decode, copy;
    for (int r = 0; r < 3; ++r) {
      KVCache block(1, 1, head_dim, parsed, seed);
      auto start = Clock::now();
      block.append(0, data.keys.data(), data.values.data(), tokens);
      prefill.push_back(static_cast<double>(tokens) / seconds_since(start));
      KVCache stream(1, 1, head_dim, parsed, seed);
      start = Clock::now();
      for (size_t t = 0; t < tokens; ++t)
        stream.append(0, data.keys.data() + t * head_dim, data.values.data() + t * head_dim, 1);
      decode.push_back(static_cast<double>(tokens) / seconds_since(start));
      PagedKVCache paged(1, 1, head_dim, parsed, seed);
      const SequenceId whole = paged.add_sequence();
      start = Clock::now();
      paged.append(whole, 0, data.keys.data(), data.values.data(), tokens);
      paged_prefill.push_back(static_cast<double>(tokens) / seconds_since(start));
      PagedKVCache paged_stream(1, 1, head_dim, parsed, seed);
      const SequenceId streamed = paged_stream.add_sequence();
      start = Clock::now();
      for (size_t t = 0; t < tokens; ++t)
        paged_stream.append(streamed, 0, data.keys.data() + t * head_dim, data.values.data() + t * head_dim, 1);
      paged_decode.push_back(static_cast<double>(tokens) / seconds_since(start));
      // Into memory never touched before, as appends write into new blocks.
      const size_t floats = tokens * head_dim;
      const std::unique_ptr<float[]> copied(new float[2 * floats]);
      start = Clock::now();
      std::memcpy(copied.get(), data.keys.data(), floats * sizeof(float));
      std::memcpy(copied.get() + floats, data.values.data(), floats * sizeof(float));
      copy.push_back(static_cast<double>(tokens) / seconds_since(start));
    }
    row.prefill_tokens_per_s = median(prefill);
    row.decode_tokens_per_s = median(decode);
    row.paged_prefill_tokens_per_s = median(paged_prefill);
    row.paged_decode_tokens_per_s = median(paged_decode);
    row.copy_tokens_per_s = median(copy);
    rows.push_back(row);
  }
  omp_set_num_threads(previous_threads);
  return rows;
}

}  // namespace kvsketch
