#include "ann/log_norm.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

namespace kvsketch::log_norm {
namespace {

constexpr uint32_t kFinest = 128;

// 2^(k / 256), k = 0..255: products of 2^(1/256), 2^(2/256), ..., 2^(128/256), each a chain of
// correctly rounded square roots of 2, multiplied in a fixed order.
const std::array<double, 256> kPowers = [] {
  double roots[8];  // roots[b] = 2^(2^b / 256)
  roots[7] = std::sqrt(2.0);
  for (int b = 6; b >= 0; --b) roots[b] = std::sqrt(roots[b + 1]);
  std::array<double, 256> t{};
  for (int k = 0; k < 256; ++k) {
    double value = 1.0;
    for (int b = 0; b < 8; ++b)
      if (k & (1 << b)) value *= roots[b];
    t[static_cast<size_t>(k)] = value;
  }
  return t;
}();

// Per steps (index log2(steps) - 4): the factor of every code, as a float.
const std::array<std::array<float, 256>, 4> kFactors = [] {
  std::array<std::array<float, 256>, 4> t{};
  for (uint32_t s = 0; s < 4; ++s) {
    const int steps = 16 << s, stride = 256 / steps;
    for (int q = 1; q < 256; ++q) {
      const int step = q - 128, octave = step >= 0 ? step / steps : -((-step + steps - 1) / steps);
      t[s][static_cast<size_t>(q)] =
          static_cast<float>(std::ldexp(kPowers[static_cast<size_t>((step - octave * steps) * stride)], octave));
    }
  }
  return t;
}();

uint32_t table_of(uint32_t steps) { return steps == 16 ? 0 : steps == 32 ? 1 : steps == 64 ? 2 : 3; }

}  // namespace

bool valid(const Scale& scale) {
  return std::isfinite(scale.reference) && scale.reference > 0.0f &&
         (scale.steps == 16 || scale.steps == 32 || scale.steps == 64 || scale.steps == kFinest);
}

uint8_t encode(float value, const Scale& scale) {
  const double ratio = static_cast<double>(value) / static_cast<double>(scale.reference);
  if (!(ratio > 0.0)) return 0;
  int exponent = 0;
  double mantissa = std::frexp(ratio, &exponent);  // ratio = mantissa * 2^exponent, mantissa in [0.5, 1)
  mantissa *= 2.0;
  --exponent;
  // The step j whose interval [2^((j - 0.5) / steps), 2^((j + 0.5) / steps)) holds the mantissa.
  const int steps = static_cast<int>(scale.steps), half = 128 / steps;
  int step = 0;
  while (step < steps && mantissa >= kPowers[static_cast<size_t>((2 * step + 1) * half)]) ++step;
  const long long code = static_cast<long long>(exponent) * steps + step + 128;
  return static_cast<uint8_t>(std::clamp<long long>(code, 1, 255));
}

float decode(uint8_t code, const Scale& scale) { return kFactors[table_of(scale.steps)][code] * scale.reference; }

Scale scale_of(const float* norms, size_t n, const Scale& fallback) {
  constexpr size_t kFewest = 16;  // fewer norms say too little of the spread to come
  std::vector<float> positive;
  for (size_t i = 0; i < n; ++i)
    if (norms[i] > 0.0f) positive.push_back(norms[i]);
  Scale scale = fallback;
  if (positive.empty()) return scale;
  const auto middle = positive.begin() + static_cast<std::ptrdiff_t>((positive.size() - 1) / 2);
  std::nth_element(positive.begin(), middle, positive.end());
  scale.reference = *middle;
  if (positive.size() < kFewest) return scale;
  scale.steps = 16;
  const auto [low, high] = std::minmax_element(positive.begin(), positive.end());
  for (uint32_t steps = kFinest; steps > 16; steps /= 2) {
    const Scale finer{scale.reference, steps};
    if (encode(*low, finer) >= 128 - 63 && encode(*high, finer) <= 128 + 63) return finer;
  }
  return scale;
}

}  // namespace kvsketch::log_norm
