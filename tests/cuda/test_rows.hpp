// Rows that exercise an encoder, shared by the GPU tests and their CPU emulation.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace kvsketch::cuda {

// Rows as a model's keys: a shared offset per channel, Gaussian spread, norms over six orders of
// magnitude; then (n > 3) two zero rows, one with a spike, and a row whose square is subnormal.
inline std::vector<float> rows_of_every_kind(size_t n, size_t dim, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::normal_distribution<float> normal;
  std::vector<float> offset(dim), rows(n * dim);
  for (float& o : offset) o = 2.0f * normal(random);
  for (size_t i = 0; i < n; ++i) {
    const float scale = std::pow(10.0f, static_cast<float>(i % 7) - 3.0f);
    for (size_t j = 0; j < dim; ++j) rows[i * dim + j] = scale * (offset[j] + normal(random));
  }
  if (n > 3) {
    std::fill_n(rows.begin() + static_cast<std::ptrdiff_t>(dim), 3 * dim, 0.0f);
    rows[2 * dim + 5] = 5.0f;
    rows[3 * dim + 1] = 1e-30f;
  }
  return rows;
}

}  // namespace kvsketch::cuda
