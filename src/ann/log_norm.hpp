// One byte per stored norm (or rescale factor), on a logarithmic scale around a reference that a
// whole IVF list shares: code 0 stands for 0, code q in 1..255 for reference * 2^((q - 128) / 16).
// Steps of 4.4% (so at most 2.2% off) over 2^-7.9 .. 2^7.9 times the reference; values beyond are
// clamped to the ends. Encoding compares against constant boundaries, without libm, so that every
// machine writes the same byte.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvsketch::log_norm {

constexpr int kStepsPerOctave = 16;

// The code of value (>= 0) against reference (> 0, finite).
uint8_t encode(float value, float reference);
// reference * 2^((code - 128) / 16); 0 for code 0.
float decode(uint8_t code, float reference);
// A list's reference from the norms its vectors will have: their (lower) median, norms of 0 left
// out, or `fallback` when none is positive. Comparisons only: the same on every machine.
float reference_of(const float* norms, size_t n, float fallback);

}  // namespace kvsketch::log_norm
