// Per-token comparison of a policy's next-token distribution with the reference's, and the
// statistics llama.cpp's --kl-divergence reports over them.
#pragma once
#include <cstddef>
#include <vector>

#include "kvsketch/model/quality_eval.hpp"

namespace kvsketch::model {

// log-softmax of `vocab` logits, in double.
std::vector<double> log_softmax(const float* logits, size_t vocab);

class DistributionComparison {
 public:
  // `reference` is the reference's log-softmax, `logits` the policy's; `actual` the token that came
  // next in the text; `band` the position band it is reported in.
  void add(const double* reference, const float* logits, size_t vocab, int actual, size_t band);
  // Adds every token of another comparison (pooling seeds).
  void append(const DistributionComparison& other);
  QualityStatistics summary(size_t bands) const;
  size_t tokens() const { return kld_.size(); }
  double mean_kld() const;
  double ppl() const;

 private:
  std::vector<double> nll_, nll_reference_, kld_, delta_p_;
  std::vector<bool> same_top_;
  std::vector<size_t> band_;
};

}  // namespace kvsketch::model
