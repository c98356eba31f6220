#include "sparse/balancing_walk.hpp"

#include <algorithm>
#include <cmath>

#include "kvsketch/random.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {

std::vector<int> balancing_walk_signs(std::span<const WalkToken> batch, WalkValues values, double gain,
                                      double temperature, uint64_t seed, std::initializer_list<uint64_t> path) {
  const size_t n = batch.size();
  if (n == 0) return {};
  const size_t d = batch[0].key.size();
  std::vector<float> centre(d, 0.0f);
  double value_square = 0.0;
  for (const WalkToken& t : batch) {
    for (size_t j = 0; j < d; ++j) centre[j] += t.key[j] / static_cast<float>(n);
    if (values == WalkValues::kAugmented)
      value_square += simd::fixed_order_dot(t.value.data(), t.value.data(), t.value.size());
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
      const double e = simd::fixed_order_dot(keys[i].data(), keys[j].data(), d) * scale * temperature;
      exponent[i * n + j] = exponent[j * n + i] = e;
      top = std::max(top, e);
    }
  double radius = 0.0;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j <= i; ++j) {
      double value_term = 1.0;
      if (values != WalkValues::kOnes)
        value_term = simd::fixed_order_dot(batch[i].value.data(), batch[j].value.data(), batch[i].value.size()) +
                     (values == WalkValues::kAugmented ? alpha_square : 0.0);
      const double g = std::exp(exponent[i * n + j] - top) * value_term;
      gram[i * n + j] = gram[j * n + i] = g;
      if (i == j) radius = std::max(radius, g);
    }
  // Each sign leans against the running signed sum.
  RandomStream rng(seed, StreamPurpose::kQueries, path);
  std::vector<int> sign(n, 0);
  for (size_t j = 0; j < n; ++j) {
    double running = 0.0;
    for (size_t i = 0; i < j; ++i) running += sign[i] * gram[j * n + i];
    const double p = radius > 0.0 ? std::clamp(0.5 - gain * running / radius, 0.0, 1.0) : 0.5;
    sign[j] = rng.uniform() < p ? 1 : -1;
  }
  return sign;
}

std::vector<size_t> smaller_sign_class(const std::vector<int>& signs) {
  const size_t plus = static_cast<size_t>(std::count(signs.begin(), signs.end(), 1));
  const int keep = plus <= signs.size() - plus ? 1 : -1;
  std::vector<size_t> kept;
  for (size_t i = 0; i < signs.size(); ++i)
    if (signs[i] == keep) kept.push_back(i);
  return kept;
}

}  // namespace kvsketch
