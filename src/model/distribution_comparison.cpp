#include "model/distribution_comparison.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvsketch::model {
namespace {

double mean(const std::vector<double>& v) { return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / v.size(); }

// Standard error of the mean.
double stderr_of(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / (v.size() - 1) / v.size());
}

// The q-quantile of sorted values, interpolated between neighbours.
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double at = q * (sorted.size() - 1);
  const size_t lo = static_cast<size_t>(at), hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (at - lo) * (sorted[hi] - sorted[lo]);
}

}  // namespace

std::vector<double> log_softmax(const float* logits, size_t vocab) {
  std::vector<double> out(vocab);
  const double top = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (size_t i = 0; i < vocab; ++i) sum += std::exp(logits[i] - top);
  const double log_sum = top + std::log(sum);
  for (size_t i = 0; i < vocab; ++i) out[i] = logits[i] - log_sum;
  return out;
}

void DistributionComparison::add(const double* reference, const float* logits, size_t vocab, int actual, size_t band) {
  const std::vector<double> mine = log_softmax(logits, vocab);
  double kld = 0;
  for (size_t i = 0; i < vocab; ++i) kld += std::exp(reference[i]) * (reference[i] - mine[i]);
  const size_t top = std::max_element(mine.begin(), mine.end()) - mine.begin();
  const size_t reference_top = std::max_element(reference, reference + vocab) - reference;
  nll_.push_back(-mine[actual]);
  nll_reference_.push_back(-reference[actual]);
  kld_.push_back(std::max(0.0, kld));
  delta_p_.push_back(std::exp(mine[actual]) - std::exp(reference[actual]));
  same_top_.push_back(top == reference_top);
  band_.push_back(band);
}

void DistributionComparison::append(const DistributionComparison& o) {
  nll_.insert(nll_.end(), o.nll_.begin(), o.nll_.end());
  nll_reference_.insert(nll_reference_.end(), o.nll_reference_.begin(), o.nll_reference_.end());
  kld_.insert(kld_.end(), o.kld_.begin(), o.kld_.end());
  delta_p_.insert(delta_p_.end(), o.delta_p_.begin(), o.delta_p_.end());
  same_top_.insert(same_top_.end(), o.same_top_.begin(), o.same_top_.end());
  band_.insert(band_.end(), o.band_.begin(), o.band_.end());
}

double DistributionComparison::mean_kld() const { return mean(kld_); }
double DistributionComparison::ppl() const { return std::exp(mean(nll_)); }

QualityStatistics DistributionComparison::summary(size_t bands) const {
  QualityStatistics s;
  s.tokens = kld_.size();
  if (kld_.empty()) return s;
  s.ppl = std::exp(mean(nll_));
  s.ppl_stderr = s.ppl * stderr_of(nll_);
  std::vector<double> ratio(nll_.size());
  for (size_t i = 0; i < ratio.size(); ++i) ratio[i] = nll_[i] - nll_reference_[i];
  s.ln_ppl_ratio = mean(ratio);
  s.ln_ppl_ratio_stderr = stderr_of(ratio);
  s.kld_mean = mean(kld_);
  s.kld_stderr = stderr_of(kld_);
  std::vector<double> sorted = kld_;
  std::sort(sorted.begin(), sorted.end());
  s.kld_median = quantile(sorted, 0.5);
  s.kld_p90 = quantile(sorted, 0.9);
  s.kld_p95 = quantile(sorted, 0.95);
  s.kld_p99 = quantile(sorted, 0.99);
  s.kld_p999 = quantile(sorted, 0.999);
  s.kld_max = sorted.back();
  std::vector<double> same(same_top_.size()), squared(delta_p_.size());
  for (size_t i = 0; i < same.size(); ++i) same[i] = same_top_[i] ? 1.0 : 0.0;
  for (size_t i = 0; i < squared.size(); ++i) squared[i] = delta_p_[i] * delta_p_[i];
  s.top1_agreement = mean(same);
  s.top1_stderr = stderr_of(same);
  s.rms_delta_p = std::sqrt(mean(squared));
  // The delta method: d sqrt(m) = dm / (2 sqrt(m)).
  s.rms_delta_p_stderr = s.rms_delta_p > 0 ? stderr_of(squared) / (2 * s.rms_delta_p) : 0;
  s.kld_by_depth.assign(bands, 0.0);
  std::vector<size_t> counts(bands, 0);
  for (size_t i = 0; i < kld_.size(); ++i) {
    s.kld_by_depth[band_[i]] += kld_[i];
    ++counts[band_[i]];
  }
  for (size_t b = 0; b < bands; ++b) s.kld_by_depth[b] = counts[b] ? s.kld_by_depth[b] / counts[b] : 0;
  return s;
}

}  // namespace kvsketch::model
