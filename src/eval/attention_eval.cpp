#include "kvsketch/eval/attention_eval.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "kvsketch/attention.hpp"
#include "core/require.hpp"
#include "kvsketch/kv_cache.hpp"

namespace kvsketch {
namespace {

std::vector<size_t> top_indices(const float* logits, size_t n, size_t k) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  k = std::min(k, n);
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [&](size_t a, size_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

double log_sum_exp(const double* x, size_t n) {
  const double top = *std::max_element(x, x + n);
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(x[i] - top);
  return top + std::log(sum);
}

}  // namespace

double output_relative_error(const float* approximate, const float* exact, size_t d) {
  double diff = 0.0, norm = 0.0;
  for (size_t j = 0; j < d; ++j) {
    const double e = exact[j], a = approximate[j];
    diff += (a - e) * (a - e);
    norm += e * e;
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

std::vector<std::string> standard_policies() {
  // TurboQuant keys as the paper stores them (mse or prod, the outlier split at k.5 bits); values
  // centred and rescaled (unbiased), which attention's averaging needs.
  std::vector<std::string> policies = {"fp16", "int8", "q4_0", "kivi:b=4,group=32", "kivi:b=2,group=32"};
  for (const char* bits : {"4", "3.5", "3", "2.5"})
    for (const char* keys : {"tq_mse", "tq_prod"})
      policies.push_back(fmt::format("{}:b={}|center:tq_mse:b={},rescale=1", keys, bits, bits));
  policies.push_back("qjl:m=256|center:tq_mse:b=3,rescale=1");
  return policies;
}

namespace {

void check_case(const AttentionCase& data) {
  const size_t n = data.tokens, d = data.dim, queries = data.queries;
  require(n >= 1 && queries >= 1, "attention eval: '{}' has {} tokens and {} queries; at least one of each is needed",
          data.name, n, queries);
  require(data.keys.size() == n * d && data.values.size() == n * d && data.query_rows.size() == queries * d,
          "attention eval: keys, values and queries must be {} x {}, {} x {} and {} x {}", n, d, n, d, queries, d);
}

}  // namespace

KVCache build_policy_cache(const std::string& policy, const AttentionCase& data, uint64_t seed) {
  check_case(data);
  KVCache cache(1, 1, data.dim, KVPolicy::parse(policy), seed);
  cache.append(0, data.keys.data(), data.values.data(), data.tokens);
  cache.shrink_to_fit();
  return cache;
}

AttentionEvalRow evaluate_policy(const std::string& policy_spec, const AttentionCase& data, uint64_t seed,
                                 int timing_repetitions, int threads) {
  AttentionEvalRow row = evaluate_cache(build_policy_cache(policy_spec, data, seed), data, timing_repetitions, threads);
  row.policy = policy_spec;  // as the caller spelled it
  return row;
}

AttentionEvalRow evaluate_cache(const KVCache& cache, const AttentionCase& data, int timing_repetitions, int threads) {
  check_case(data);
  const size_t n = data.tokens, d = data.dim, queries = data.queries;
  require(cache.layers() == 1 && cache.kv_heads() == 1 && cache.head_dim() == d && cache.tokens(0) == n,
          "attention eval: the cache holds {} layers x {} kv heads x {} tokens of dimension {}; '{}' needs 1 x 1 x {} "
          "of dimension {}",
          cache.layers(), cache.kv_heads(), cache.tokens(0), cache.head_dim(), data.name, n, d);
  AttentionEvalRow row;
  row.policy = cache.policy().spec();
  row.regime = data.name;
  row.tokens = n;
  row.bytes = cache.bytes();
  row.bits_per_value = cache.bits_per_value();

  const AttentionResult approximate = decode_attention(cache, 0, 0, data.query_rows.data(), queries);
  const AttentionResult exact = reference_attention(data.query_rows.data(), queries, data.keys.data(),
                                                    data.values.data(), n, d);
  const std::vector<float> logits = decode_logits(cache, 0, 0, data.query_rows.data(), queries);
  const HeadCache& head = cache.head(0, 0);
  const size_t body_first = head.sink_count, body_end = head.sink_count + head.body_count();
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  // Score errors of one query share its direction: the honest standard error is across queries.
  std::vector<double> query_bias(queries, 0.0);
  std::vector<double> exact_logits(n), approx_logits(n);
  std::vector<float> exact_float(n);
  for (size_t q = 0; q < queries; ++q) {
    row.rel_error += output_relative_error(approximate.output.data() + q * d, exact.output.data() + q * d, d);
    for (size_t i = 0; i < n; ++i) {
      double dot = 0.0;
      for (size_t j = 0; j < d; ++j) dot += static_cast<double>(data.query_rows[q * d + j]) * data.keys[i * d + j];
      exact_logits[i] = dot * scale;
      exact_float[i] = static_cast<float>(exact_logits[i]);
      approx_logits[i] = logits[q * n + i];
      if (i >= body_first && i < body_end) query_bias[q] += approx_logits[i] - exact_logits[i];
    }
    const double exact_lse = log_sum_exp(exact_logits.data(), n), approx_lse = log_sum_exp(approx_logits.data(), n);
    double kl = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const double p = std::exp(exact_logits[i] - exact_lse);
      kl += p * ((exact_logits[i] - exact_lse) - (approx_logits[i] - approx_lse));
    }
    row.kl += std::max(kl, 0.0);
    const auto top_exact = top_indices(exact_float.data(), n, 8);
    const auto top_approx = top_indices(logits.data() + q * n, n, 8);
    std::vector<size_t> common;
    std::set_intersection(top_exact.begin(), top_exact.end(), top_approx.begin(), top_approx.end(),
                          std::back_inserter(common));
    row.top8_overlap += static_cast<double>(common.size()) / static_cast<double>(top_exact.size());
  }
  row.rel_error /= static_cast<double>(queries);
  row.kl /= static_cast<double>(queries);
  row.top8_overlap /= static_cast<double>(queries);
  if (body_end > body_first) {
    for (double& bias : query_bias) bias /= static_cast<double>(body_end - body_first);
    const double mean = std::accumulate(query_bias.begin(), query_bias.end(), 0.0) / static_cast<double>(queries);
    double squares = 0.0;
    for (double bias : query_bias) squares += (bias - mean) * (bias - mean);
    row.score_error_mean = mean;
    row.score_error_stderr_queries =
        queries > 1 ? std::sqrt(squares / static_cast<double>(queries - 1) / static_cast<double>(queries)) : 0.0;
  }

  std::vector<double> times;
  AttentionOptions options;
  options.threads = threads;
  for (int r = 0; r < std::max(timing_repetitions, 1); ++r) {
    const auto start = std::chrono::steady_clock::now();
    const AttentionResult again = decode_attention(cache, 0, 0, data.query_rows.data(), queries, options);
    const auto stop = std::chrono::steady_clock::now();
    times.push_back(std::chrono::duration<double, std::nano>(stop - start).count() / static_cast<double>(queries));
    (void)again;
  }
  std::sort(times.begin(), times.end());
  row.ns_per_query = times[times.size() / 2];
  row.ns_spread = (times[times.size() * 3 / 4] - times[times.size() / 4]) / row.ns_per_query;
  return row;
}

}  // namespace kvsketch
