#include "kvsketch/eval/sparse_bench.hpp"

#include <omp.h>

#include "eval/bench_timing.hpp"
#include "kvsketch/attention.hpp"
#include "core/require.hpp"
#include "kvsketch/half.hpp"
#include "kvsketch/kv_cache.hpp"
#include "kvsketch/sparse_attention.hpp"
#include "kvsketch/eval/synthetic_cache.hpp"

namespace kvsketch {
namespace {

using bench::Clock;
using bench::seconds_since;

constexpr size_t kSinks = 4, kWindow = 64, kQueries = 16;

std::vector<std::string> default_methods() {
  return {"magicpig:K=8,L=75", "magicpig:K=9,L=120", "magicpig:K=10,L=150", "balancekv:ratio=0.25",
          "balancekv:ratio=0.0625"};
}

}  // namespace

std::vector<SparseBenchRow> bench_sparse(const SparseBenchConfig& config) {
  const size_t d = config.head_dim, n = config.tokens;
  require(n > kSinks + kWindow + config.decode_tokens,
          "bench sparse: {} tokens leave no body to prefill; more than {} are needed ({} sinks, a window of {} and "
          "{} tokens appended one at a time)",
          n, kSinks + kWindow + config.decode_tokens, kSinks, kWindow, config.decode_tokens);
  const std::vector<std::string> methods = config.methods.empty() ? default_methods() : config.methods;
  const SyntheticCache data = make_synthetic_cache("long-tailed", n, d, kQueries, config.seed);
  const size_t body_tokens = n - kSinks - kWindow, prefill = body_tokens - config.decode_tokens;
  const float* body_keys = data.keys.data() + kSinks * d;
  const float* body_values = data.values.data() + kSinks * d;
  const int previous_threads = omp_get_max_threads();
  omp_set_num_threads(1);

  // Dense fp16 over every token, copies beyond the last-level cache.
  const size_t copies = bench::copies_beyond_cache(n * d * 2 * sizeof(uint16_t));
  KVCache cache(copies, 1, d, KVPolicy::parse("fp16"), config.seed);
  for (size_t c = 0; c < copies; ++c) cache.append(c, data.keys.data(), data.values.data(), n);
  cache.shrink_to_fit();
  AttentionOptions one_thread;
  one_thread.threads = 1;
  const double fp16_ns = bench::median_ns_per_copy(copies, config.repetitions, [&](size_t c, size_t pass) {
    decode_attention(cache, c, 0, data.query_rows.data() + (c + pass) % kQueries * d, 1, one_thread);
  });

  // The exact part: sinks and window, as a selection over the whole sequence.
  TokenSelection exact_part;
  for (size_t t = 0; t < n; ++t)
    if (t < kSinks || t >= n - kWindow) {
      exact_part.tokens.push_back(static_cast<uint32_t>(t));
      exact_part.log_weights.push_back(0.0f);
    }

  std::vector<uint16_t> half_keys(data.keys.size()), half_values(data.values.size());
  for (size_t i = 0; i < half_keys.size(); ++i) {
    half_keys[i] = float_to_half(data.keys[i]);
    half_values[i] = float_to_half(data.values[i]);
  }
  std::vector<SparseBenchRow> rows;
  for (const std::string& method : methods) {
    SparseBenchRow row;
    auto selector = make_selector(method, d, config.seed);
    row.method = selector->spec();
    row.tokens = n;
    row.layers = copies;
    auto start = Clock::now();
    selector->append(body_keys, body_values, prefill);
    row.prefill_tokens_per_s = static_cast<double>(prefill) / seconds_since(start);
    start = Clock::now();
    for (size_t t = prefill; t < body_tokens; ++t) selector->append(body_keys + t * d, body_values + t * d, 1);
    row.insert_us_per_token = seconds_since(start) * 1e6 / static_cast<double>(config.decode_tokens);
    row.index_bytes_per_token = static_cast<double>(selector->index_bytes()) / static_cast<double>(body_tokens);

    // Each copy: its own selector and its own fp16 K and V (what a layer holds, as dense fp16 does).
    std::vector<std::unique_ptr<TokenSelector>> selectors;
    std::vector<std::vector<uint16_t>> keys, values;
    for (size_t c = 0; c < copies; ++c) {
      selectors.push_back(selector->clone());
      keys.push_back(half_keys);
      values.push_back(half_values);
    }
    double selected = 0.0;
    size_t steps = 0;
    row.ns_per_query = bench::median_ns_per_copy(copies, config.repetitions, [&](size_t c, size_t pass) {
      const size_t q = (c + pass) % kQueries;
      const float* query = data.query_rows.data() + q * d;
      const BodyView body = BodyView::half(keys[c].data() + kSinks * d, values[c].data() + kSinks * d, body_tokens, d);
      const TokenSelection selection = selectors[c]->select(query, body, q);
      AttentionResult out = weighted_attention(query, body, selection);
      merge_attention(out, weighted_attention(query, BodyView::half(keys[c].data(), values[c].data(), n, d), exact_part));
      selected += static_cast<double>(selection.tokens.size());
      ++steps;
    });
    row.budget = selected / static_cast<double>(steps) / static_cast<double>(body_tokens);
    row.fp16_ns_per_query = fp16_ns;
    row.fraction_of_fp16 = row.ns_per_query / fp16_ns;
    rows.push_back(row);
  }
  omp_set_num_threads(previous_threads);
  return rows;
}

}  // namespace kvsketch
