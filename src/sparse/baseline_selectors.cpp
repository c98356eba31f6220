// Baselines under the selector interface: exact, sink + window (no body token), oracle top-k,
// uniform sampling and oracle sampling (probability proportional to the exact softmax weight).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "codec/spec_parser.hpp"
#include "core/require.hpp"
#include "kvsketch/random.hpp"
#include "simd/kernels.hpp"
#include "sparse/baseline_selectors.hpp"
#include "sparse/body_rows.hpp"
#include "sparse/oracle_scores.hpp"

namespace kvsketch {

std::vector<float> body_logits(const float* query, const BodyView& body) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(body.dim));
  std::vector<float> logits(body.tokens);
  body_key_scores(query, body, nullptr, body.tokens, scale, logits.data());
  return logits;
}

double log_sum_exp(const std::vector<float>& logits) {
  if (logits.empty()) return -INFINITY;
  const float top = *std::max_element(logits.begin(), logits.end());
  double total = 0.0;
  for (const float logit : logits) total += std::exp(static_cast<double>(logit - top));
  return top + std::log(total);
}

namespace {

// How many of n body tokens a budget fraction asks for: at least one.
size_t budget_count(double budget, size_t n) {
  return std::clamp<size_t>(static_cast<size_t>(std::llround(budget * static_cast<double>(n))), 1, std::max<size_t>(n, 1));
}

// The baselines index nothing but the count of tokens appended; a body other than those is refused.
class CountingSelector : public TokenSelector {
 public:
  CountingSelector(size_t dim, const char* name) : dim_(dim), name_(name) {}
  void append(const float*, const float*, size_t n) override { tokens_ += n; }
  size_t tokens() const override { return tokens_; }

 protected:
  void check(const BodyView& body) const { require_indexed_body(body, tokens_, dim_, name_); }

 private:
  size_t tokens_ = 0, dim_;
  const char* name_;
};

class ExactSelector final : public CountingSelector {
 public:
  explicit ExactSelector(size_t dim) : CountingSelector(dim, "exact") {}
  std::unique_ptr<TokenSelector> clone() const override { return std::make_unique<ExactSelector>(*this); }
  std::string spec() const override { return "exact"; }
  TokenSelection select(const float*, const BodyView& body, uint64_t) const override {
    check(body);
    TokenSelection s;
    s.tokens.resize(body.tokens);
    std::iota(s.tokens.begin(), s.tokens.end(), 0u);
    s.log_weights.assign(body.tokens, 0.0f);
    return s;
  }
};

class WindowSelector final : public CountingSelector {
 public:
  explicit WindowSelector(size_t dim) : CountingSelector(dim, "window") {}
  std::unique_ptr<TokenSelector> clone() const override { return std::make_unique<WindowSelector>(*this); }
  std::string spec() const override { return "window"; }
  TokenSelection select(const float*, const BodyView& body, uint64_t) const override {
    check(body);
    return {};
  }
};

class TopKSelector final : public CountingSelector {
 public:
  std::unique_ptr<TokenSelector> clone() const override { return std::make_unique<TopKSelector>(*this); }
  TopKSelector(size_t dim, double budget) : CountingSelector(dim, "topk"), budget_(budget) {}
  std::string spec() const override { return fmt::format("topk:budget={}", budget_); }
  TokenSelection select(const float* query, const BodyView& body, uint64_t) const override {
    check(body);
    const std::vector<float> logits = body_logits(query, body);
    std::vector<uint32_t> order(body.tokens);
    std::iota(order.begin(), order.end(), 0u);
    const size_t keep = std::min(budget_count(budget_, body.tokens), body.tokens);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                      [&](uint32_t a, uint32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    TokenSelection s;
    s.tokens.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep));
    std::sort(s.tokens.begin(), s.tokens.end());
    s.log_weights.assign(keep, 0.0f);  // renormalized over the kept tokens (the paper's Eq. 3)
    return s;
  }

 private:
  double budget_;
};

class UniformSelector final : public CountingSelector {
 public:
  std::unique_ptr<TokenSelector> clone() const override { return std::make_unique<UniformSelector>(*this); }
  UniformSelector(size_t dim, double budget, uint64_t seed)
      : CountingSelector(dim, "uniform"), budget_(budget), seed_(seed) {}
  std::string spec() const override { return fmt::format("uniform:budget={}", budget_); }
  TokenSelection select(const float*, const BodyView& body, uint64_t draw) const override {
    check(body);
    const size_t n = body.tokens, keep = std::min(budget_count(budget_, n), n);
    // Partial Fisher-Yates over the body, from a stream per (seed, draw).
    RandomStream rng(seed_, StreamPurpose::kQueries, {0x5a3d, draw});
    std::vector<uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    for (size_t i = 0; i < keep; ++i) std::swap(order[i], order[i + rng.below(n - i)]);
    TokenSelection s;
    s.tokens.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep));
    std::sort(s.tokens.begin(), s.tokens.end());
    // Each token is in the sample with probability keep / n: weight n / keep (Horvitz-Thompson).
    s.log_weights.assign(keep, static_cast<float>(std::log(static_cast<double>(n) / static_cast<double>(keep))));
    return s;
  }

 private:
  double budget_;
  uint64_t seed_;
};

class OracleSamplingSelector final : public CountingSelector {
 public:
  std::unique_ptr<TokenSelector> clone() const override { return std::make_unique<OracleSamplingSelector>(*this); }
  OracleSamplingSelector(size_t dim, double budget, uint64_t seed)
      : CountingSelector(dim, "oracle"), budget_(budget), seed_(seed) {}
  std::string spec() const override { return fmt::format("oracle:budget={}", budget_); }
  TokenSelection select(const float* query, const BodyView& body, uint64_t draw) const override {
    check(body);
    const std::vector<float> logits = body_logits(query, body);
    const double lse = log_sum_exp(logits);
    std::vector<double> cumulative(body.tokens);
    double running = 0.0;
    for (size_t i = 0; i < body.tokens; ++i) cumulative[i] = running += std::exp(logits[i] - lse);
    const size_t draws = budget_count(budget_, body.tokens);
    RandomStream rng(seed_, StreamPurpose::kQueries, {0x0a5c, draw});
    std::vector<uint32_t> counts(body.tokens, 0);
    for (size_t b = 0; b < draws; ++b) {
      const double u = rng.uniform() * running;
      const size_t i = static_cast<size_t>(std::upper_bound(cumulative.begin(), cumulative.end(), u) - cumulative.begin());
      ++counts[std::min(i, body.tokens - 1)];
    }
    // Eq. 5: o = sum_i (f_i / B) v_i. As weights on the logits: exp(logit_i + w_i) = (f_i / B) Z,
    // so that the part's log-sum-exp is the body's exact log Z and it merges with the window.
    TokenSelection s;
    for (size_t i = 0; i < body.tokens; ++i)
      if (counts[i]) {
        s.tokens.push_back(static_cast<uint32_t>(i));
        s.log_weights.push_back(static_cast<float>(std::log(static_cast<double>(counts[i]) / static_cast<double>(draws)) +
                                                   lse - logits[i]));
      }
    return s;
  }

 private:
  double budget_;
  uint64_t seed_;
};

}  // namespace

std::unique_ptr<TokenSelector> make_baseline_selector(const ParsedSpec& parsed, size_t dim, uint64_t seed) {
  if (parsed.name == "exact" || parsed.name == "window") {
    SpecParameters(parsed.name, parsed.values, {}, "selector");
    if (parsed.name == "exact") return std::make_unique<ExactSelector>(dim);
    return std::make_unique<WindowSelector>(dim);
  }
  if (parsed.name != "topk" && parsed.name != "uniform" && parsed.name != "oracle") return nullptr;
  const SpecParameters p(parsed.name, parsed.values, {"budget"}, "selector");
  require(p.has("budget"), "selector '{}': parameter budget (fraction of the body, in (0, 1]) is required", parsed.name);
  const double budget = p.real("budget", 0.0, 1e-9, 1.0);
  if (parsed.name == "topk") return std::make_unique<TopKSelector>(dim, budget);
  if (parsed.name == "uniform") return std::make_unique<UniformSelector>(dim, budget, seed);
  return std::make_unique<OracleSamplingSelector>(dim, budget, seed);
}

}  // namespace kvsketch
