// BalanceKV (Han et al.): streaming selection by discrepancy. Three modes:
//  - joint (default): one MergeAndReduce (Algorithm 4) over batches of t tokens, each full batch
//    halved by the balancing walk (Algorithm 2) over [v ; alpha], kernel
//    exp(<k_i, k_j> / sqrt(d)) (<v_i, v_j> + alpha^2), alpha^2 the batch's mean ||v||^2: one subset
//    balances numerator and denominator at once, as a KV cache needs (specs/balancekv.md 6.7).
//  - paper: Algorithm 1 as stated. Numerator instances per value-norm bucket (2^(i-1) <= ||v|| <
//    2^i; ||v|| = 0 feeds only the denominator) with kernel exp(..) <v_i, v_j>, and one denominator
//    instance with v = 1. Buckets with 2^i <= eps / (2 n) e^(-r^2 / sqrt d) max||v|| are erased
//    (eps = 0.1, r the largest key norm so far; later tokens may recreate one). The attention
//    divides the numerator subsets' sum by the denominator subset's.
//  - prefill: the experiments' practical variant (Appendix B, the public code): the first append
//    (the prefill) is halved T times, each time in contiguous blocks of b tokens walked
//    independently and exactly floor(m / 2) tokens kept globally (the -1 class first, then +1, in
//    token order); decoded tokens are kept raw until b 2^T have gathered, then compressed the same
//    way (the public code keeps them all).
// Common decisions (specs/balancekv.md section 6): the walk's p_j = 1/2 - gain * s_j / R^2, R^2 the
// largest diagonal entry, clamped to [0, 1] (no FAIL). The default gain, 1e6, makes p 0 or 1 unless
// |s_j| < 1e-6 R^2: each sign opposes the running sum. That is what the public code does: its
// gamma = 4 multiplies unnormalised kernel entries, of order e^(||k||^2 / sqrt d) ||v||^2 >> 1 on
// real keys, so its p saturates too. (The paper's c = 30 log(n / delta) leaves p within a hair of
// 1/2, a random halving; gain 4 against R^2 is still nearly random when one large key sets R^2.)
// Keys centred by the batch mean inside the kernel; temp scales the exponent (1: the paper's
// kernel); a token at level l weighs 2^l (log weight l ln 2).
#include "sparse/balancekv.hpp"

#include <algorithm>
#include <cmath>

#include "core/require.hpp"
#include "simd/kernels.hpp"
#include "sparse/body_rows.hpp"

namespace kvsketch {
namespace {

constexpr double kEraseEpsilon = 0.1;

void append_levelled(const std::vector<LevelledToken>& kept, std::vector<uint32_t>& ids, std::vector<float>& weights) {
  const float ln2 = std::log(2.0f);
  for (const LevelledToken& t : kept) {
    ids.push_back(t.id);
    weights.push_back(static_cast<float>(t.level) * ln2);
  }
}

// Sorts (id, weight) pairs by id.
void sort_by_id(std::vector<uint32_t>& ids, std::vector<float>& weights) {
  std::vector<size_t> order(ids.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids[a] < ids[b]; });
  std::vector<uint32_t> sorted_ids;
  std::vector<float> sorted_weights;
  for (const size_t i : order) {
    sorted_ids.push_back(ids[i]);
    sorted_weights.push_back(weights[i]);
  }
  ids = std::move(sorted_ids);
  weights = std::move(sorted_weights);
}

}  // namespace

BalanceKV::BalanceKV(size_t dim, int levels, size_t batch, double gain, double temperature, uint64_t seed,
                     BalanceMode mode)
    : dim_(dim), levels_(levels), batch_(batch), gain_(gain), temperature_(temperature), seed_(seed), mode_(mode) {
  require(temperature >= 0.0 && temperature <= 1.0, "balancekv: temp must be in 0..1, got {}", temperature);
  require(levels >= 1 && levels <= 16, "balancekv: the ratio must be 1/2^T with T in 1..16, got T = {}", levels);
  require(batch >= 2 && batch <= 65536, "balancekv: block (batch size t) must be in 2..65536, got {}", batch);
  require(gain >= 0.0 && gain <= 1e6, "balancekv: gain must be in 0..1e6, got {}", gain);
  if (mode == BalanceMode::kJoint)
    joint_.emplace(levels, batch, WalkValues::kAugmented, gain, temperature, seed, std::vector<uint64_t>{0xba1a});
  if (mode == BalanceMode::kPaper)
    denominator_.emplace(levels, batch, WalkValues::kOnes, gain, temperature, seed, std::vector<uint64_t>{0xba1c, 0});
}

std::string BalanceKV::spec() const {
  const char* mode = mode_ == BalanceMode::kJoint ? "joint" : mode_ == BalanceMode::kPaper ? "paper" : "prefill";
  return fmt::format("balancekv:ratio={},block={},gain={},temp={},mode={}", std::ldexp(1.0, -levels_), batch_, gain_,
                     temperature_, mode);
}

void BalanceKV::add_paper(WalkToken token) {
  const double value_norm = std::sqrt(simd::sum_of_squares(token.value.data(), dim_));
  largest_value_norm_ = std::max(largest_value_norm_, value_norm);
  largest_key_norm_ = std::max(largest_key_norm_, static_cast<double>(std::sqrt(simd::sum_of_squares(token.key.data(), dim_))));
  denominator_->add(token);  // a copy: the numerator bucket takes the token itself
  if (value_norm > 0.0) {
    const int bucket = static_cast<int>(std::floor(std::log2(value_norm))) + 1;  // 2^(i-1) <= ||v|| < 2^i
    auto found = numerators_.find(bucket);
    if (found == numerators_.end())
      found = numerators_
                  .emplace(bucket, MergeAndReduce(levels_, batch_, WalkValues::kValues, gain_, temperature_, seed_,
                                                  std::vector<uint64_t>{0xba1b, static_cast<uint64_t>(bucket + 4096)}))
                  .first;
    found->second.add(std::move(token));
  }
  // Line 8: drop buckets whose tokens cannot matter (log2 of the threshold, to stay finite).
  const double log2_threshold = std::log2(kEraseEpsilon / (2.0 * static_cast<double>(tokens_ + 1))) -
                                largest_key_norm_ * largest_key_norm_ / std::sqrt(static_cast<double>(dim_)) / std::log(2.0) +
                                std::log2(std::max(largest_value_norm_, 1e-300));
  for (auto it = numerators_.begin(); it != numerators_.end();)
    it = it->first <= log2_threshold ? numerators_.erase(it) : std::next(it);
}

void BalanceKV::compress_segment(std::vector<WalkToken> segment) {
  const uint64_t index = segments_++;
  for (int iteration = 0; iteration < levels_ && segment.size() > 1; ++iteration) {
    std::vector<size_t> minus, plus;  // positions in the segment, in token order
    for (size_t first = 0, block = 0; first < segment.size(); first += batch_, ++block) {
      const size_t last = std::min(first + batch_, segment.size());
      const std::span<const WalkToken> part(segment.data() + first, last - first);
      const std::vector<int> signs = balancing_walk_signs(part, WalkValues::kAugmented, gain_, temperature_, seed_,
                                                          {0xba1d, index * 64 + static_cast<uint64_t>(iteration), block});
      for (size_t i = 0; i < signs.size(); ++i) (signs[i] < 0 ? minus : plus).push_back(first + i);
    }
    std::vector<size_t> keep = minus;
    keep.insert(keep.end(), plus.begin(), plus.end());
    keep.resize(segment.size() / 2);
    std::sort(keep.begin(), keep.end());
    std::vector<WalkToken> next;
    for (const size_t i : keep) next.push_back(std::move(segment[i]));
    segment = std::move(next);
  }
  for (const WalkToken& t : segment) compressed_.push_back(t.id);
}

void BalanceKV::append(const float* keys, const float* values, size_t n) {
  require_finite(keys, n, dim_, "keys");
  require_finite(values, n, dim_, "values");
  const bool prefill = tokens_ == 0;
  for (size_t r = 0; r < n; ++r) {
    WalkToken token{static_cast<uint32_t>(tokens_), std::vector<float>(keys + r * dim_, keys + (r + 1) * dim_),
                    std::vector<float>(values + r * dim_, values + (r + 1) * dim_)};
    if (mode_ == BalanceMode::kJoint) joint_->add(std::move(token));
    if (mode_ == BalanceMode::kPaper) add_paper(std::move(token));
    if (mode_ == BalanceMode::kPrefill) raw_.push_back(std::move(token));
    ++tokens_;
  }
  if (mode_ != BalanceMode::kPrefill) return;
  const size_t segment = batch_ << levels_;
  if (prefill && n >= 2) {
    compress_segment(std::move(raw_));
    raw_.clear();
  }
  while (raw_.size() >= segment) {
    std::vector<WalkToken> part(std::make_move_iterator(raw_.begin()),
                                std::make_move_iterator(raw_.begin() + static_cast<std::ptrdiff_t>(segment)));
    raw_.erase(raw_.begin(), raw_.begin() + static_cast<std::ptrdiff_t>(segment));
    compress_segment(std::move(part));
  }
}

TokenSelection BalanceKV::select(const float*, const BodyView& body, uint64_t) const {
  require_indexed_body(body, tokens_, dim_, "balancekv");
  TokenSelection s;
  if (mode_ == BalanceMode::kJoint) append_levelled(joint_->kept(), s.tokens, s.log_weights);
  if (mode_ == BalanceMode::kPrefill) {
    const float weight = static_cast<float>(levels_) * std::log(2.0f);
    for (const uint32_t id : compressed_) {
      s.tokens.push_back(id);
      s.log_weights.push_back(weight);
    }
    for (const WalkToken& t : raw_) {
      s.tokens.push_back(t.id);
      s.log_weights.push_back(0.0f);
    }
  }
  if (mode_ == BalanceMode::kPaper) {
    for (const auto& [bucket, instance] : numerators_) append_levelled(instance.kept(), s.tokens, s.log_weights);
    s.separate_denominator = true;
    append_levelled(denominator_->kept(), s.denominator_tokens, s.denominator_log_weights);
  }
  sort_by_id(s.tokens, s.log_weights);
  return s;
}

size_t BalanceKV::index_bytes() const {
  if (mode_ == BalanceMode::kJoint) return joint_->bytes();
  if (mode_ == BalanceMode::kPrefill) return compressed_.size() * sizeof(uint32_t) + raw_.size() * (4 + 2 * dim_ * sizeof(float));
  size_t total = denominator_->bytes();
  for (const auto& [bucket, instance] : numerators_) total += instance.bytes();
  return total;
}

size_t BalanceKV::memory_tokens() const {
  if (mode_ == BalanceMode::kJoint) return joint_->held_tokens();
  if (mode_ == BalanceMode::kPrefill) return compressed_.size() + raw_.size();
  size_t total = denominator_->held_tokens();
  for (const auto& [bucket, instance] : numerators_) total += instance.held_tokens();
  return total;
}

}  // namespace kvsketch
