#include "ann/log_norm.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

namespace kvsketch::log_norm {
namespace {

// 2^(j / 16) and the boundaries 2^((j + 0.5) / 16) between neighbouring steps, j = 0..15.
constexpr double kSteps[16] = {
    1, 1.0442737824274138, 1.0905077326652577, 1.1387886347566916, 1.189207115002721, 1.241857812073484,
    1.2968395546510096, 1.3542555469368927, 1.4142135623730951, 1.4768261459394993, 1.5422108254079407,
    1.6104903319492543, 1.681792830507429, 1.7562521603732995, 1.8340080864093424, 1.9152065613971474};
constexpr double kBoundaries[16] = {
    1.0218971486541166, 1.0671404006768237, 1.1143867425958924, 1.1637248587775775, 1.215247359980469,
    1.2690509571917332, 1.3252366431597413, 1.383909881963832, 1.4451808069770467, 1.5091644275934228,
    1.5759808451078865, 1.6457554781539649, 1.7186192981224779, 1.7947090750031072, 1.8741676341103,
    1.9571441241754002};

// The factor of each code, 2^((q - 128) / 16), by exact scaling of the constants.
const std::array<float, 256> kFactors = [] {
  std::array<float, 256> t{};
  for (int q = 1; q < 256; ++q) {
    const int step = q - 128, octave = step >= 0 ? step / 16 : -((-step + 15) / 16);
    t[static_cast<size_t>(q)] = static_cast<float>(std::ldexp(kSteps[step - octave * 16], octave));
  }
  return t;
}();

}  // namespace

uint8_t encode(float value, float reference) {
  const double ratio = static_cast<double>(value) / static_cast<double>(reference);
  if (!(ratio > 0.0)) return 0;
  int exponent = 0;
  double mantissa = std::frexp(ratio, &exponent);  // ratio = mantissa * 2^exponent, mantissa in [0.5, 1)
  mantissa *= 2.0;
  --exponent;
  int step = 0;
  while (step < 16 && mantissa >= kBoundaries[step]) ++step;
  const long long code = static_cast<long long>(exponent) * kStepsPerOctave + step + 128;
  return static_cast<uint8_t>(std::clamp<long long>(code, 1, 255));
}

float decode(uint8_t code, float reference) {
  return kFactors[code] * reference;
}

float reference_of(const float* norms, size_t n, float fallback) {
  std::vector<float> positive;
  for (size_t i = 0; i < n; ++i)
    if (norms[i] > 0.0f) positive.push_back(norms[i]);
  if (positive.empty()) return fallback;
  const auto middle = positive.begin() + static_cast<std::ptrdiff_t>((positive.size() - 1) / 2);
  std::nth_element(positive.begin(), middle, positive.end());
  return *middle;
}

}  // namespace kvsketch::log_norm
