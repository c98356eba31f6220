#include "kvsketch/eval/sparse_eval.hpp"

#include <algorithm>
#include <cmath>

#include "kvsketch/codec.hpp"
#include "core/require.hpp"
#include "kvsketch/sparse_attention.hpp"
#include "simd/kernels.hpp"
#include "sparse/body_rows.hpp"

namespace kvsketch {
namespace {

// KL(approximate || exact) over the tokens the approximation weights (finite: exact is positive).
// The approximate logits of body tokens are the body's own (estimated from codes, when it has codes).
double approximate_kl(const float* query, const AttentionCase& data, size_t first_body, const BodyView& body_view,
                      const TokenSelection& body, const AttentionResult& approximate, const AttentionResult& exact,
                      size_t sinks, size_t window_start) {
  const size_t d = data.dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  double kl = 0.0;
  auto add = [&](double exact_logit, double approximate_logit) {
    const double log_q = approximate_logit - approximate.lse[0], log_p = exact_logit - exact.lse[0];
    kl += std::exp(log_q) * (log_q - log_p);
  };
  auto exact_logit = [&](size_t token) { return simd::dot(query, data.keys.data() + token * d, d) * scale; };
  auto add_exact = [&](size_t token) {
    const double logit = exact_logit(token);
    add(logit, logit);
  };
  for (size_t t = 0; t < sinks; ++t) add_exact(t);
  for (size_t t = window_start; t < data.tokens; ++t) add_exact(t);
  // The approximate distribution is the normalizer's: BalanceKV's paper mode has its own subset.
  const auto& tokens = body.separate_denominator ? body.denominator_tokens : body.tokens;
  const auto& log_weights = body.separate_denominator ? body.denominator_log_weights : body.log_weights;
  std::vector<float> logits(tokens.size());
  body_key_scores(query, body_view, tokens.data(), tokens.size(), scale, logits.data());
  for (size_t s = 0; s < tokens.size(); ++s) add(exact_logit(first_body + tokens[s]), logits[s] + log_weights[s]);
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

// The body [first, first + n) as the selection attention reads it: the float rows, or the codes of
// a key and a value codec (calibrated, where a codec chooses outlier channels, on the whole body:
// the prefill).
class EvaluatedBody {
 public:
  EvaluatedBody(const AttentionCase& data, size_t first, size_t n, const SparseEvalConfig& config) {
    const size_t d = data.dim;
    const float* keys = data.keys.data() + first * d;
    const float* values = data.values.data() + first * d;
    if (config.body.empty()) {
      view_ = BodyView{keys, values, n, d};
      name_ = "float";
      bytes_ = 2 * 2 * d * n;  // what fp16 K and V would hold
      return;
    }
    const std::vector<std::string> specs = split_pair(config.body);
    key_codec_ = make_codec(specs[0], d, config.seed);
    value_codec_ = make_codec(specs[1], d, config.seed + 1);
    if (key_codec_->calibrated_by_data()) key_codec_->calibrate(keys, n);
    if (value_codec_->calibrated_by_data()) value_codec_->calibrate(values, n);
    key_codes_ = key_codec_->make_buffer();
    value_codes_ = value_codec_->make_buffer();
    key_codec_->encode(keys, n, key_codes_);
    value_codec_->encode(values, n, value_codes_);
    view_ = BodyView::compressed(*key_codec_, key_codes_, *value_codec_, value_codes_);
    name_ = key_codec_->spec() + "|" + value_codec_->spec();
    bytes_ = key_codes_.bytes() + value_codes_.bytes() + key_codec_->calibration().size() +
             value_codec_->calibration().size();
  }
  const BodyView& view() const { return view_; }
  const std::string& name() const { return name_; }
  size_t bytes() const { return bytes_; }

 private:
  static std::vector<std::string> split_pair(const std::string& text) {
    const size_t bar = text.find('|');
    if (bar == std::string::npos) return {text, text};
    require(text.find('|', bar + 1) == std::string::npos && bar > 0 && bar + 1 < text.size(),
            "sparse --body: expected KEY|VALUE codec specs (or one spec for both), got '{}'", text);
    return {text.substr(0, bar), text.substr(bar + 1)};
  }
  BodyView view_;
  std::string name_;
  size_t bytes_ = 0;
  std::unique_ptr<VectorCodec> key_codec_, value_codec_;
  CodeBuffer key_codes_, value_codes_;
};

SparseEvalRow evaluate_method(const std::string& spec, const AttentionCase& data, const SparseEvalConfig& config,
                       const EvaluatedBody& stored, const std::vector<AttentionResult>& exact) {
  const size_t d = data.dim, first = config.sinks, end = data.tokens - config.window, n = end - first;
  auto selector = make_selector(spec, d, config.seed);
  selector->append(data.keys.data() + first * d, data.values.data() + first * d, n);
  const BodyView& body = stored.view();
  SparseEvalRow row;
  row.method = selector->spec();
  row.regime = data.name;
  row.body = stored.name();
  row.index_bytes = selector->index_bytes();
  row.kv_bytes = stored.bytes();
  for (size_t q = 0; q < data.queries; ++q) {
    const float* query = data.query_rows.data() + q * d;
    const TokenSelection selection = selector->select(query, body, q);
    AttentionResult out = weighted_attention(query, body, selection);
    merge_attention(out, reference_attention(query, 1, data.keys.data(), data.values.data(), first, d));
    merge_attention(out, reference_attention(query, 1, data.keys.data() + end * d, data.values.data() + end * d,
                                             data.tokens - end, d));
    row.rel_error += output_relative_error(out.output.data(), exact[q].output.data(), d);
    row.lse_error += std::fabs(static_cast<double>(out.lse[0]) - exact[q].lse[0]);
    row.kl += approximate_kl(query, data, first, body, selection, out, exact[q], first, end);
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
  const EvaluatedBody stored(data, config.sinks, data.tokens - config.sinks - config.window, config);
  auto evaluate = [&](const std::string& spec) { return evaluate_method(spec, data, config, stored, exact); };
  std::vector<SparseEvalRow> rows;
  if (!config.methods.empty()) {
    for (const std::string& spec : config.methods) rows.push_back(evaluate(spec));
    return rows;
  }
  // The baselines at the budget their method read, written to 4 decimals: at least 0.0001, as a
  // sampler that read nothing (keys all alike) would otherwise give the refused budget=0.0000.
  const auto at_budget = [&](const char* baseline, double budget) {
    return evaluate(fmt::format("{}:budget={:.4f}", baseline, std::max(budget, 1e-4)));
  };
  for (const std::string magicpig : {"magicpig:K=8,L=75", "magicpig:K=9,L=120", "magicpig:K=10,L=150"}) {
    rows.push_back(evaluate(magicpig));
    const double budget = rows.back().budget;
    rows.push_back(at_budget("topk", budget));
    rows.push_back(at_budget("uniform", budget));
  }
  for (const char* ratio : {"0.5", "0.25", "0.125", "0.0625"}) {
    rows.push_back(evaluate(std::string("balancekv:ratio=") + ratio));
    rows.push_back(at_budget("uniform", rows.back().budget));
  }
  rows.push_back(evaluate("window"));
  return rows;
}

}  // namespace kvsketch
