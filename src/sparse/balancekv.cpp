// BalanceKV (Han et al.): streaming MergeAndReduce (Algorithm 4) over batches of t tokens, each
// full batch halved by SoftmaxBalance (Algorithm 2: the self-balancing walk over the lifted
// vectors phi(k) (x) v), a token at level l weighted 2^l. Selection is query-independent.
//
// Decisions (specs/balancekv.md section 6):
//  - One subset for numerator and denominator: the walk balances [v ; alpha] (values with a
//    constant coordinate, alpha^2 = the batch's mean ||v||^2), kernel
//    exp(<k_i, k_j> / sqrt(d)) (<v_i, v_j> + alpha^2), so that both sums are balanced at once.
//  - Keys are centred by the batch mean m inside the kernel: for any query q, the signed sum of
//    exp(<k_i - m, q> / sqrt(d)) v_i is the original one times exp(-<m, q> / sqrt(d)), so the walk
//    balances the same sums while the kernel stays in range (the public code centres too). The
//    exponent is also shifted by its batch maximum (p_j is invariant to a common scale).
//  - temp scales the kernel's exponent (1: the paper's exp(<k_i, k_j> / sqrt(d)); the public code
//    has the same knob): with large key norms the exact kernel is nearly diagonal and the walk
//    sees no correlations to balance, which makes it a uniform random halving.
//  - The walk: p_j = 1/2 - gain * s_j / R^2 with R^2 the largest diagonal entry (the paper's
//    1 / (2 c R^2) with c = 1 / (2 gain)), clamped to [0, 1] (no FAIL). Default gain 4 (as the
//    public code's gamma): the paper's c = 30 log(n / delta) leaves p within a hair of 1/2, a
//    random halving; on a 256-token batch gain 4 cuts the halving error to below half of that.
//  - Output: the smaller sign class, as Algorithm 2 states (at most half; weight x2).
//  - Levels 0..T with T = log2(1 / ratio): tokens that reach level T stay there. Memory: the
//    n / 2^T tokens of level T plus at most t per lower level (O(d t T) beyond the kept cache).
#include <algorithm>
#include <cmath>

#include "kvsketch/error.hpp"
#include "kvsketch/random.hpp"
#include "simd/kernels.hpp"
#include "sparse/balancekv.hpp"

namespace kvsketch {

BalanceKV::BalanceKV(size_t dim, int levels, size_t batch, double gain, double temperature, uint64_t seed)
    : dim_(dim),
      levels_(levels),
      batch_(batch),
      gain_(gain),
      temperature_(temperature),
      seed_(seed),
      pending_(static_cast<size_t>(levels)) {
  require(temperature >= 0.0 && temperature <= 1.0, "balancekv: temp must be in 0..1, got {}", temperature);
  require(levels >= 1 && levels <= 16, "balancekv: the ratio must be 1/2^T with T in 1..16, got T = {}", levels);
  require(batch >= 2 && batch <= 65536, "balancekv: block (batch size t) must be in 2..65536, got {}", batch);
  require(gain >= 0.0 && gain <= 1e6, "balancekv: gain must be in 0..1e6, got {}", gain);
}

std::string BalanceKV::spec() const {
  return fmt::format("balancekv:ratio={},block={},gain={},temp={}", std::ldexp(1.0, -levels_), batch_, gain_,
                     temperature_);
}

size_t BalanceKV::index_bytes() const {
  // Kept token ids (u32) and levels (u8), plus the float K/V copies of tokens below level T.
  size_t kept = final_.size(), waiting = 0;
  for (const auto& level : pending_) kept += level.size(), waiting += level.size();
  return kept * 5 + waiting * 2 * dim_ * sizeof(float);
}

size_t BalanceKV::memory_tokens() const {
  size_t total = final_.size();
  for (const auto& level : pending_) total += level.size();
  return total;
}

std::vector<size_t> BalanceKV::halve(const std::vector<Token>& batch, uint64_t stream) const {
  const size_t n = batch.size(), d = dim_;
  // Kernel exp(<k_i - m, k_j - m> / sqrt(d) - shift) (<v_i, v_j> + alpha^2).
  std::vector<float> centre(d, 0.0f);
  double value_square = 0.0;
  for (const Token& t : batch) {
    for (size_t j = 0; j < d; ++j) centre[j] += t.key[j] / static_cast<float>(n);
    value_square += simd::fixed_order_dot(t.value.data(), t.value.data(), d);
  }
  const double alpha_square = value_square / static_cast<double>(n);
  std::vector<std::vector<float>> keys(n, std::vector<float>(d));
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < d; ++j) keys[i][j] = batch[i].key[j] - centre[j];
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> exponent(n * n), gram(n * n);
  double top = -INFINITY;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j <= i; ++j) {
      const double e = simd::fixed_order_dot(keys[i].data(), keys[j].data(), d) * scale * temperature_;
      exponent[i * n + j] = exponent[j * n + i] = e;
      top = std::max(top, e);
    }
  double radius = 0.0;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j <= i; ++j) {
      const double g = std::exp(exponent[i * n + j] - top) *
                       (simd::fixed_order_dot(batch[i].value.data(), batch[j].value.data(), d) + alpha_square);
      gram[i * n + j] = gram[j * n + i] = g;
      if (i == j) radius = std::max(radius, g);
    }
  // The self-balancing walk: each sign leans against the running signed sum.
  RandomStream rng(seed_, StreamPurpose::kQueries, {0xba1a, stream});
  std::vector<int> sign(n, 0);
  for (size_t j = 0; j < n; ++j) {
    double running = 0.0;
    for (size_t i = 0; i < j; ++i) running += sign[i] * gram[j * n + i];
    const double p = radius > 0.0 ? std::clamp(0.5 - gain_ * running / radius, 0.0, 1.0) : 0.5;
    sign[j] = rng.uniform() < p ? 1 : -1;
  }
  const size_t plus = static_cast<size_t>(std::count(sign.begin(), sign.end(), 1));
  const int keep = plus <= n - plus ? 1 : -1;  // the smaller class; ties to +1
  std::vector<size_t> kept;
  for (size_t i = 0; i < n; ++i)
    if (sign[i] == keep) kept.push_back(i);
  return kept;
}

void BalanceKV::append(const float* keys, const float* values, size_t n) {
  require_finite(keys, n, dim_, "keys");
  require_finite(values, n, dim_, "values");
  for (size_t r = 0; r < n; ++r) {
    pending_[0].push_back({static_cast<uint32_t>(tokens_ + r), std::vector<float>(keys + r * dim_, keys + (r + 1) * dim_),
                           std::vector<float>(values + r * dim_, values + (r + 1) * dim_)});
    // Algorithm 4: a full batch at level l is halved into level l + 1; two halves make a batch.
    for (size_t level = 0; level < pending_.size() && pending_[level].size() >= batch_; ++level) {
      const std::vector<size_t> kept = halve(pending_[level], batches_++);
      std::vector<Token> out;
      for (const size_t i : kept) out.push_back(std::move(pending_[level][i]));
      pending_[level].clear();
      if (level + 1 == pending_.size()) {
        for (const Token& t : out) final_.push_back(t.id);
      } else {
        for (Token& t : out) pending_[level + 1].push_back(std::move(t));
      }
    }
  }
  tokens_ += n;
}

TokenSelection BalanceKV::select(const float*, const BodyView& body, uint64_t) const {
  require(body.tokens == tokens_ && body.dim == dim_, "balancekv: the body has {} tokens of dimension {}, the index {} of {}",
          body.tokens, body.dim, tokens_, dim_);
  std::vector<std::pair<uint32_t, float>> chosen;
  const float ln2 = std::log(2.0f);
  for (const uint32_t id : final_) chosen.emplace_back(id, static_cast<float>(levels_) * ln2);
  for (size_t level = 0; level < pending_.size(); ++level)
    for (const Token& t : pending_[level]) chosen.emplace_back(t.id, static_cast<float>(level) * ln2);
  std::sort(chosen.begin(), chosen.end());
  TokenSelection s;
  for (const auto& [id, weight] : chosen) {
    s.tokens.push_back(id);
    s.log_weights.push_back(weight);
  }
  return s;
}

}  // namespace kvsketch
