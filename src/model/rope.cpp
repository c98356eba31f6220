#include "model/rope.hpp"

#include <cmath>
#include <numbers>

namespace kvsketch::model {

Rope::Rope(const RopeConfig& config, size_t head_dim) : head_dim_(head_dim), inverse_frequencies_(head_dim / 2) {
  for (size_t i = 0; i < head_dim / 2; ++i) {
    // transformers computes these in float32: theta ** (2i / d) with the exponent a float32.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    double f = 1.0 / std::pow(config.theta, static_cast<double>(exponent));
    if (config.scaling == RopeScaling::kLinear) {
      f /= config.factor;
    } else if (config.scaling == RopeScaling::kLlama3) {
      const double original = static_cast<double>(config.original_max_position_embeddings);
      const double low_wavelength = original / config.low_freq_factor;
      const double high_wavelength = original / config.high_freq_factor;
      const double wavelength = 2 * std::numbers::pi / f;
      if (wavelength > low_wavelength) {
        f /= config.factor;
      } else if (wavelength >= high_wavelength) {
        const double smooth = (original / wavelength - config.low_freq_factor) /
                              (config.high_freq_factor - config.low_freq_factor);
        f = (1 - smooth) * f / config.factor + smooth * f;
      }
    }
    inverse_frequencies_[i] = static_cast<float>(f);
  }
}

void Rope::apply(float* vectors, size_t heads, size_t position) const {
  const size_t half = head_dim_ / 2;
  for (size_t i = 0; i < half; ++i) {
    // The angle as transformers forms it: a float32 product of position and frequency.
    const float angle = static_cast<float>(position) * inverse_frequencies_[i];
    const float c = std::cos(angle), s = std::sin(angle);
    for (size_t h = 0; h < heads; ++h) {
      float* x = vectors + h * head_dim_;
      const float a = x[i], b = x[i + half];
      x[i] = a * c - b * s;
      x[i + half] = b * c + a * s;
    }
  }
}

}  // namespace kvsketch::model
