#include <cmath>
#include <algorithm>
#include <cstring>
#include <fmt/format.h>

#include "core/require.hpp"
#include "kvsketch/random.hpp"
#include "kvsketch/transform.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {

RandomizedHadamard::RandomizedHadamard(size_t dim, int rounds, uint64_t seed) : dim_(dim), rounds_(rounds) {
  require(dim >= 1, "RandomizedHadamard: dim must be >= 1, got {}", dim);
  require(rounds >= 1 && rounds <= 16, "RandomizedHadamard: rounds must be in 1..16, got {}", rounds);
  window_ = 1;
  while (window_ * 2 <= dim) window_ *= 2;
  RandomStream stream(seed, StreamPurpose::kRotation, {dim, static_cast<uint64_t>(rounds)});
  // Each step multiplies by (random sign / sqrt(p)) and then by the unnormalized H_p, which keeps
  // magnitudes bounded and the product orthogonal.
  const float step_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(window_)));
  std::vector<float> pending(dim, 1.0f);  // +-1 flips not yet applied
  for (int r = 0; r < rounds; ++r) {
    const size_t windows = window_ == dim ? 1 : 2;
    for (size_t w = 0; w < windows; ++w) {
      Step step{w == 0 ? 0 : dim - window_, std::vector<float>(window_)};
      for (size_t j = 0; j < dim; ++j) {
        const float sign = stream.sign();
        if (j >= step.offset && j < step.offset + window_) {
          step.factors[j - step.offset] = pending[j] * sign * step_scale;
          pending[j] = 1.0f;
        } else {
          pending[j] *= sign;
        }
      }
      steps_.push_back(std::move(step));
    }
  }
  final_flips_ = std::move(pending);
}

void RandomizedHadamard::apply_scaled(const float* x, float scale, float* out) const {
  // The first step reads x (scaling on the way); the coordinates outside its window are scaled
  // into place. The steps after it work in place.
  const Step& first = steps_.front();
  if (window_ != dim_) {
    const size_t rest = first.offset == 0 ? window_ : 0, count = dim_ - window_;
    if (out != x) std::memcpy(out + rest, x + rest, count * sizeof(float));
    if (scale != 1.0f) simd::scale(out + rest, scale, count);
  }
  simd::scaled_multiply_fwht(x + first.offset, scale, first.factors.data(), out + first.offset, window_);
  for (size_t s = 1; s < steps_.size(); ++s)
    simd::multiply_fwht(out + steps_[s].offset, steps_[s].factors.data(), window_);
  apply_final_flips(out);
}

void RandomizedHadamard::apply_final_flips(float* data) const {
  if (window_ == dim_) return;
  // The last step took its window's flips in its factors: only the coordinates outside it carry one.
  const size_t begin = steps_.back().offset, end = begin + window_;
  if (begin > 0) simd::multiply(data, final_flips_.data(), begin);
  if (end < dim_) simd::multiply(data + end, final_flips_.data() + end, dim_ - end);
}

void RandomizedHadamard::apply_transpose(const float* x, float* out) const {
  if (out != x) std::memcpy(out, x, dim_ * sizeof(float));
  apply_final_flips(out);
  for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) {
    simd::fwht(out + it->offset, window_);
    simd::multiply(out + it->offset, it->factors.data(), window_);
  }
}

RandomizedHadamard::Plan RandomizedHadamard::plan() const {
  Plan plan{window_, {}, {}, final_flips_};
  for (const Step& step : steps_) {
    plan.offsets.push_back(step.offset);
    plan.factors.insert(plan.factors.end(), step.factors.begin(), step.factors.end());
  }
  // Coordinates outside the last window carry their flips; those inside took theirs in its
  // factors, as apply_final_flips() reads them.
  if (window_ == dim_) std::fill(plan.final_flips.begin(), plan.final_flips.end(), 1.0f);
  const size_t begin = steps_.back().offset;
  std::fill(plan.final_flips.begin() + begin, plan.final_flips.begin() + begin + window_, 1.0f);
  return plan;
}

std::string RandomizedHadamard::name() const { return fmt::format("hadamard:rounds={}", rounds_); }

size_t RandomizedHadamard::bytes() const {
  size_t total = final_flips_.size() * sizeof(float);
  for (const Step& step : steps_) total += step.factors.size() * sizeof(float);
  return total;
}

}  // namespace kvsketch
