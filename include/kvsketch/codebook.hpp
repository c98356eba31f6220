// Lloyd-Max scalar codebooks (paper Eq. 3) for the coordinate law of a randomly rotated unit
// vector: the exact law f_X(x) ~ (1 - x^2)^((d-3)/2) on [-1, 1] (Lemma 1), or its Gaussian limit
// N(0, 1/d). Computed once per (law, dimension) for b = 0..8 and cached (thread-safe).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

// The library is built with hidden visibility: what this header declares is its exported API.
#pragma GCC visibility push(default)
namespace kvsketch {

enum class CoordinateLaw { kBeta, kGaussian };

struct Codebook {
  CoordinateLaw law;
  size_t dim;
  int bits;
  double cost;                      // d * C(f_X, b): expected ||x - x~||^2 for a unit x (D_mse)
  std::vector<double> centroids_scaled;   // 2^b sorted centroids in units of sqrt(d) * x
  std::vector<float> centroids;     // in x units
  std::vector<float> boundaries;    // 2^b - 1 midpoints in x units
  std::vector<double> cell_probability;   // probability of each index under the law
};

// bits in 0..8, dim >= 2. bits = 0 is the single centroid 0 (cost 1).
const Codebook& lloyd_max_codebook(CoordinateLaw law, size_t dim, int bits);

std::string coordinate_law_name(CoordinateLaw law);

}  // namespace kvsketch
#pragma GCC visibility pop
