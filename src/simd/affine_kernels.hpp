// Decoding of affine (min/step) integer codes to floats: the KIVI and q4_0 baselines read every
// row they score this way, so it runs at vector width rather than a value at a time.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvsketch::simd {

// out[c] = low[c / group] + step[c / group] * (levels[c] - offset) for c < n: one product and one
// sum, rounded in that order on every target (the same bits as the scalar expression).
void affine_decode(const uint8_t* levels, size_t n, const float* low, const float* step, size_t group, int offset,
                   float* out);

}  // namespace kvsketch::simd
