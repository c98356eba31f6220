#include "kvsketch/eval/paged_bench.hpp"

#include <algorithm>
#include <optional>

#include "core/team_size.hpp"
#include "eval/bench_timing.hpp"
#include "kvsketch/attention.hpp"
#include "core/require.hpp"
#include "kvsketch/kv_cache.hpp"
#include "kvsketch/paged_cache.hpp"
#include "kvsketch/eval/synthetic_cache.hpp"

namespace kvsketch {
namespace {

using bench::Clock;
using bench::median;
using bench::seconds_since;

// The first `tokens` rows of `rows` (tokens x dim) once per KV head: [kv_heads][tokens][dim].
std::vector<float> every_head(const std::vector<float>& rows, size_t tokens, size_t dim, size_t kv_heads) {
  std::vector<float> out;
  out.reserve(kv_heads * tokens * dim);
  for (size_t h = 0; h < kv_heads; ++h)
    out.insert(out.end(), rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(tokens * dim));
  return out;
}

struct Workload {
  std::vector<size_t> contexts;                // per sequence of the batch
  std::vector<std::vector<float>> keys, values;  // per distinct context: [kv_heads][tokens][dim]
  std::vector<size_t> slot;                    // per sequence: its index in keys/values
};

Workload make_workload(const PagedBenchConfig& config, const SyntheticCache& data) {
  Workload w;
  for (size_t b = 0; b < config.batch; ++b) {
    const size_t tokens = config.contexts[b % config.contexts.size()];
    const auto known = std::find(w.contexts.begin(), w.contexts.end(), tokens);
    if (known != w.contexts.end() && b >= config.contexts.size()) {
      w.slot.push_back(w.slot[static_cast<size_t>(known - w.contexts.begin())]);
    } else {
      w.slot.push_back(w.keys.size());
      w.keys.push_back(every_head(data.keys, tokens, data.dim, config.kv_heads));
      w.values.push_back(every_head(data.values, tokens, data.dim, config.kv_heads));
    }
    w.contexts.push_back(tokens);
  }
  return w;
}

// A cache of `layers` layers, each holding the batch's sequences.
PagedKVCache build_paged(const KVPolicy& policy, const PagedBenchConfig& config, const Workload& w, size_t layers,
                         std::vector<SequenceId>& ids) {
  PagedKVCache cache(layers, config.kv_heads, config.head_dim, policy, config.seed);
  ids.clear();
  for (size_t b = 0; b < config.batch; ++b) {
    ids.push_back(cache.add_sequence());
    for (size_t layer = 0; layer < layers; ++layer)
      cache.append(ids.back(), layer, w.keys[w.slot[b]].data(), w.values[w.slot[b]].data(), w.contexts[b]);
  }
  return cache;
}

}  // namespace

std::vector<PagedBenchRow> bench_paged_attention(const PagedBenchConfig& config) {
  require(!config.policies.empty() && !config.contexts.empty() && !config.threads.empty(),
          "bench attention: policies, contexts and threads must not be empty");
  require(config.batch >= 1, "bench attention: the batch must hold at least one sequence");
  for (const int threads : config.threads) {
    check_threads(threads, "bench attention");
    require(threads >= 1, "bench attention: thread counts must be at least 1, got 0");
  }
  std::vector<KVPolicy> policies;
  for (const std::string& spec : config.policies) policies.push_back(KVPolicy::parse(spec));
  const size_t d = config.head_dim, group = config.query_heads, kv = config.kv_heads, q_heads = group * kv;
  const size_t most = *std::max_element(config.contexts.begin(), config.contexts.end());
  require(most >= 1, "bench attention: contexts must hold at least one token");
  const SyntheticCache data = make_synthetic_cache("long-tailed", most, d, group, config.seed);
  const Workload work = make_workload(config, data);
  std::vector<float> queries;  // [batch][q_heads][d]: every sequence and KV head asks the same
  for (size_t i = 0; i < config.batch * kv; ++i)
    queries.insert(queries.end(), data.query_rows.begin(), data.query_rows.end());
  std::vector<float> output(config.batch * q_heads * d), lse(config.batch * q_heads);

  std::vector<PagedBenchRow> rows;
  for (size_t p = 0; p < policies.size(); ++p) {
    std::vector<SequenceId> ids;
    size_t layers = config.layers;
    if (layers == 0) {
      const PagedKVCache probe = build_paged(policies[p], config, work, 1, ids);
      layers = bench::copies_beyond_cache(probe.bytes());
    }
    PagedKVCache cache = build_paged(policies[p], config, work, layers, ids);
    std::optional<KVCache> single;
    if (config.batch == 1) {
      single.emplace(layers, kv, d, policies[p], config.seed);
      for (size_t layer = 0; layer < layers; ++layer)
        single->append(layer, work.keys[0].data(), work.values[0].data(), work.contexts[0]);
    }
    // Fork against appending again, one layer's worth.
    std::vector<double> fork_times, append_times;
    for (int r = 0; r < std::max(config.repetitions, 1); ++r) {
      auto start = Clock::now();
      const SequenceId copy = cache.fork(ids[0]);
      fork_times.push_back(seconds_since(start) * 1e9 / static_cast<double>(layers));
      cache.remove_sequence(copy);
      PagedKVCache again(1, kv, d, policies[p], config.seed);
      const SequenceId id = again.add_sequence();
      start = Clock::now();
      again.append(id, 0, work.keys[0].data(), work.values[0].data(), work.contexts[0]);
      append_times.push_back(seconds_since(start) * 1e9);
    }
    for (const int threads : config.threads) {
      AttentionOptions options;
      options.threads = threads;
      std::vector<size_t> kinds = {layers, layers};
      if (single) kinds.push_back(layers);
      const auto times = bench::interleaved_ns_per_copy(kinds, config.repetitions, [&](size_t kind, size_t layer,
                                                                                       size_t) {
        if (kind == 0) {
          cache.decode(layer, ids.data(), ids.size(), queries.data(), q_heads, output.data(), lse.data(), options);
        } else if (kind == 1) {
          for (size_t b = 0; b < ids.size(); ++b)
            cache.decode(layer, &ids[b], 1, queries.data() + b * q_heads * d, q_heads, output.data() + b * q_heads * d,
                         lse.data() + b * q_heads, options);
        } else {
          decode_attention_layer(*single, layer, queries.data(), q_heads, options);
        }
      });
      PagedBenchRow row;
      row.policy = config.policies[p];
      row.batch = config.batch;
      row.layers = layers;
      for (const size_t tokens : work.contexts) row.tokens += tokens;
      row.threads = threads;
      row.bytes = cache.bytes() / layers;
      row.batch_ns = median(times[0]);
      row.single_ns = median(times[1]);
      row.batch_speedup = bench::median_ratio(times[1], times[0]);
      if (single) {
        row.kv_cache_ns = median(times[2]);
        row.paged_vs_kv_cache = bench::median_ratio(times[0], times[2]);
      }
      row.fork_ns = median(fork_times);
      row.append_ns = median(append_times);
      rows.push_back(row);
    }
  }
  return rows;
}

}  // namespace kvsketch
