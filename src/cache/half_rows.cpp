#include "cache/half_rows.hpp"

#include <cmath>

#include "core/require.hpp"
#include "kvsketch/half.hpp"
#include "simd/attention_kernels.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {

void check_half_range(const float* x, size_t layer, size_t kv_heads, size_t tokens, size_t first_position, size_t dim,
                      const char* what) {
  // Fast scan: |x| > 65504 (0x477FE000), NaN and Inf all have larger magnitude bits.
  if (simd::largest_magnitude_bits(x, kv_heads * tokens * dim) <= 0x477FE000u) return;
  for (size_t h = 0; h < kv_heads; ++h)
    for (size_t t = 0; t < tokens; ++t)
      for (size_t c = 0; c < dim; ++c) {
        const float v = x[(h * tokens + t) * dim + c];
        if (std::isfinite(v) && std::abs(v) <= kHalfMax) continue;
        throw Error(fmt::format("append: {} of layer {}, kv head {}, token {} (position {}), channel {} is {}; "
                                "a cache holds finite fp16 values (|x| <= 65504)",
                                what, layer, h, t, first_position + t, c, v));
      }
}

void append_halves(std::vector<uint16_t>& out, const float* rows, size_t count) {
  const size_t start = out.size();
  out.resize(start + count);
  simd::float_to_half_row(rows, count, out.data() + start);
}

void halves_to_floats(const uint16_t* in, size_t count, float* out) { simd::half_to_float_row(in, count, out); }

void trim_window_capacity(std::vector<uint16_t>& window, size_t steady) {
  if (window.capacity() <= 2 * steady || window.size() > steady) return;
  std::vector<uint16_t> trimmed;
  trimmed.reserve(steady);
  trimmed.assign(window.begin(), window.end());
  window.swap(trimmed);
}

}  // namespace kvsketch
