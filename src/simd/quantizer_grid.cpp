#include "simd/quantizer_grid.hpp"

#include <cmath>

namespace kvsketch::simd {

QuantizerGrid make_quantizer_grid(const float* boundaries, int bits) {
  QuantizerGrid grid;
  if (bits < 3 || bits > 4) return grid;  // 1 and 2 bits: the direct count is already short
  const int count = (1 << bits) - 1;
  const float span = boundaries[count - 1] - boundaries[0];
  if (!(span > 0.0f) || !std::isfinite(span)) return grid;
  grid.low = boundaries[0];
  grid.inverse_step = static_cast<float>(QuantizerGrid::kCells) / span;
  for (auto& row : grid.thresholds)
    for (float& t : row) t = HUGE_VALF;
  int k = 0;
  for (int c = 0; c < QuantizerGrid::kCells; ++c) {
    grid.base[c] = k;
    int in_cell = 0;
    for (; k < count && quantizer_grid_cell(boundaries[k], grid.low, grid.inverse_step) == c; ++k, ++in_cell)
      if (in_cell < QuantizerGrid::kMaxPerCell) grid.thresholds[in_cell][c] = boundaries[k];
    if (in_cell > grid.per_cell) grid.per_cell = in_cell;
  }
  grid.usable = k == count && grid.per_cell <= QuantizerGrid::kMaxPerCell;
  return grid;
}

}  // namespace kvsketch::simd
