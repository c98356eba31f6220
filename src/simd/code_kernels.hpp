// Kernels that turn stored codes back into floats for the generic multi-query path (a block of
// rows decoded once, then every query head of a GQA group reads the floats). Exact: every target
// gives the same floats. (Packed indices and sign bits decode in registers: row_kernels.hpp.)
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvsketch::simd {

// out[j] = (int8) codes[j] as float, j < count.
void int8_to_floats(const uint8_t* codes, size_t count, float* out);

}  // namespace kvsketch::simd
