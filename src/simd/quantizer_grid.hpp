// A uniform grid over a scalar quantizer's boundaries, so that a value's index takes a few table
// look-ups instead of a search over all 2^b - 1 boundaries.
//
// cell(v) = clamp(trunc((v - low) * inverse_step), 0, kCells - 1) is monotone in v (each step is
// a monotone IEEE operation), so every boundary whose own cell is below cell(v) lies below v and
// every one whose cell is above lies above it. The index (boundaries strictly below v) is therefore
// base[cell] plus the comparisons with the boundaries of v's own cell: exactly quantize()'s count,
// with no tolerance, as long as the kernel computes cell() with the same operations.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvsketch::simd {

struct QuantizerGrid {
  static constexpr int kCells = 8;         // one AVX2 register of lanes per table
  static constexpr int kMaxPerCell = 3;    // comparisons per value
  bool usable = false;  // false: too few boundaries, or a cell holds more than kMaxPerCell
  int per_cell = 0;     // the most boundaries any cell holds
  float low = 0.0f, inverse_step = 0.0f;
  // Padded to 16 lanes, so that any vector width up to 512 bits loads a whole table.
  alignas(64) int32_t base[16] = {};  // boundaries in the cells below
  alignas(64) float thresholds[kMaxPerCell][16] = {};  // the cell's boundaries in order, then +inf
};

// The cell of v (the kernels compute the same float operations lane by lane).
inline int quantizer_grid_cell(float v, float low, float inverse_step) {
  float x = (v - low) * inverse_step;
  x = x > 0.0f ? x : 0.0f;
  x = x < static_cast<float>(QuantizerGrid::kCells - 1) ? x : static_cast<float>(QuantizerGrid::kCells - 1);
  return static_cast<int>(x);
}

// The grid for sorted boundaries (2^bits - 1 of them); usable only for bits 3 and 4. Pass it to
// simd::quantize (kernels.hpp) with the same boundaries.
QuantizerGrid make_quantizer_grid(const float* boundaries, int bits);

}  // namespace kvsketch::simd
