#include "kvsketch/sparse_eval.hpp"

#include <algorithm>
#include <cmath>

#include "kvsketch/error.hpp"
#include "kvsketch/sparse_attention.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {
namespace {

// KL(approximate || exact) over the tokens the approximation weights (finite: exact is positive).
double approximate_kl(const float* query, const AttentionCase& data, size_t first_body, const TokenSelection& body,
                      const AttentionResult& approximate, const AttentionResult& exact, size_t sinks,
                      size_t window_start) {
  const size_t d = data.dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  double kl = 0.0;
  auto add = [&](size_t token, double log_weight) {
    const double logit = simd::dot(query, data.keys.data() + token * d, d) * scale;
    const double log_q = logit + log_weight - approximate.lse[0], log_p = logit - exact.lse[0];
    kl += std::exp(log_q) * (log_q - log_p);
  };
  for (size_t t = 0; t < sinks; ++t) add(t, 0.0);
  for (size_t t = window_start; t < data.tokens; ++t) add(t, 0.0);
  // The approximate distribution is the normalizer's: BalanceKV's paper mode has its own subset.
  const auto& tokens = body.separate_denominator ? body.denominator_tokens : body.tokens;
  const auto& log_weights = body.separate_denominator ? body.denominator_log_weights : body.log_weights;
  for (size_t s = 0; s < tokens.size(); ++s) add(first_body + tokens[s], log_weights[s]);
  return std::max(kl, 0.0);
}

// Body tokens whose K or V the attention reads (numerator and denominator subsets together).
size_t tokens_read(const TokenSelection& selection) {
  if (!selection.separate_denominator) return selection.tokens.size();
  std::vector<uint32_t> all = selection.tokens;
  all.insert(all.end(), selection.denominator_tokens.begin(), selection.denominator_tokens.end());
  std::sort(all.begin(), all.end());
  return static_cast<size_t>(std::unique(all.begin(), all.end()) - all.begin());
}

SparseEvalRow evaluate(const std::string& spec, const AttentionCase& data, const SparseEvalConfig& config,
                       const std::vector<AttentionResult>& exact) {
  const size_t d = data.dim, first = config.sinks, end = data.tokens - config.window, n = end - first;
  auto selector = make_selector(spec, d, config.seed);
  selector->append(data.keys.data() + first * d, data.values.data() + first * d, n);
  const BodyView body{data.keys.data() + first * d, data.values.data() + first * d, n, d};
  SparseEvalRow row;
  row.method = selector->spec();
  row.regime = data.name;
  row.index_bytes = selector->index_bytes();
  row.kv_bytes = 2 * 2 * d * n;
  for (size_t q = 0; q < data.queries; ++q) {
    const float* query = data.query_rows.data() + q * d;
    const TokenSelection selection = selector->select(query, body, q);
    AttentionResult out = weighted_attention(query, body, selection);
    merge_attention(out, reference_attention(query, 1, data.keys.data(), data.values.data(), first, d));
    merge_attention(out, reference_attention(query, 1, data.keys.data() + end * d, data.values.data() + end * d,
                                             data.tokens - end, d));
    double error = 0.0, norm = 0.0;
    for (size_t j = 0; j < d; ++j) {
      error += std::pow(static_cast<double>(out.output[j]) - exact[q].output[j], 2);
      norm += std::pow(static_cast<double>(exact[q].output[j]), 2);
    }
    row.rel_error += std::sqrt(error / norm);
    row.lse_error += std::fabs(static_cast<double>(out.lse[0]) - exact[q].lse[0]);
    row.kl += approximate_kl(query, data, first, selection, out, exact[q], first, end);
    row.budget += static_cast<double>(tokens_read(selection)) / static_cast<double>(n);
  }
  const double count = static_cast<double>(data.queries);
  row.rel_error /= count;
  row.lse_error /= count;
  row.kl /= count;
  row.budget /= count;
  return row;
}

}  // namespace

std::vector<SparseEvalRow> run_sparse_eval(const AttentionCase& data, const SparseEvalConfig& config) {
  require(data.tokens > config.sinks + config.window, "sparse: {} tokens leave no body after {} sinks and a window of {}",
          data.tokens, config.sinks, config.window);
  require(data.queries > 0, "sparse: no queries");
  std::vector<AttentionResult> exact;
  for (size_t q = 0; q < data.queries; ++q)
    exact.push_back(reference_attention(data.query_rows.data() + q * data.dim, 1, data.keys.data(),
                                        data.values.data(), data.tokens, data.dim));
  std::vector<SparseEvalRow> rows;
  if (!config.methods.empty()) {
    for (const std::string& spec : config.methods) rows.push_back(evaluate(spec, data, config, exact));
    return rows;
  }
  for (const std::string magicpig : {"magicpig:K=8,L=75", "magicpig:K=9,L=120", "magicpig:K=10,L=150"}) {
    rows.push_back(evaluate(magicpig, data, config, exact));
    const double budget = std::max(rows.back().budget, 1e-6);
    rows.push_back(evaluate(fmt::format("topk:budget={:.4f}", budget), data, config, exact));
    rows.push_back(evaluate(fmt::format("uniform:budget={:.4f}", budget), data, config, exact));
  }
  for (const char* ratio : {"0.5", "0.25", "0.125", "0.0625"}) {
    rows.push_back(evaluate(std::string("balancekv:ratio=") + ratio, data, config, exact));
    const double budget = std::max(rows.back().budget, 1e-6);
    rows.push_back(evaluate(fmt::format("uniform:budget={:.4f}", budget), data, config, exact));
  }
  rows.push_back(evaluate("window", data, config, exact));
  return rows;
}

}  // namespace kvsketch
