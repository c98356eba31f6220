// One byte per stored norm (or rescale factor), on a logarithmic scale that a whole IVF list
// shares: code 0 stands for 0, code q in 1..255 for reference * 2^((q - 128) / steps), steps per
// octave 16, 32, 64 or 128, whichever is finest while the list's training norms lie within half
// the range. With 64 steps (norms within a factor of 2 of the median) a norm is at most 0.54% off;
// values beyond the range are clamped to its ends. Every constant comes from square roots and
// products, which IEEE arithmetic rounds exactly, so every machine writes and reads the same bits.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvsketch::log_norm {

struct Scale {
  float reference = 1.0f;  // finite, > 0
  uint32_t steps = 16;     // per octave: 16, 32, 64 or 128
};

bool valid(const Scale& scale);
// The code of value (>= 0).
uint8_t encode(float value, const Scale& scale);
// reference * 2^((code - 128) / steps); 0 for code 0.
float decode(uint8_t code, const Scale& scale);
// A list's scale from the norms its vectors will have (norms of 0 left out): the reference is
// their (lower) median, the steps the finest whose half range (63 codes either side) holds every
// norm. From fewer than 16 norms, the fallback's steps (and its reference when there is none).
Scale scale_of(const float* norms, size_t n, const Scale& fallback);

}  // namespace kvsketch::log_norm
