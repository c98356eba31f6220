#include "ann/kmeans.hpp"

#include <omp.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "kvsketch/random.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {

std::vector<float> squared_norms(const std::vector<float>& centroids, size_t dim) {
  const size_t nlist = centroids.size() / dim;
  std::vector<float> out(nlist);
  for (size_t c = 0; c < nlist; ++c) out[c] = simd::sum_of_squares(centroids.data() + c * dim, dim);
  return out;
}

void assign_nearest(const float* x, size_t n, size_t dim, const std::vector<float>& centroids,
                    const std::vector<float>& squared, uint32_t* assignment, float* distance) {
  const size_t nlist = squared.size();
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const float* row = x + i * dim;
    // ||x - c||^2 - ||x||^2 = ||c||^2 - 2 <x, c>: the row's own norm ranks nothing.
    float best = std::numeric_limits<float>::infinity();
    uint32_t best_list = 0;
    for (size_t c = 0; c < nlist; ++c) {
      const float d = squared[c] - 2.0f * simd::fixed_order_dot(row, centroids.data() + c * dim, dim);
      if (d < best) {
        best = d;
        best_list = static_cast<uint32_t>(c);
      }
    }
    assignment[i] = best_list;
    if (distance) distance[i] = best + simd::sum_of_squares(row, dim);
  }
}

std::vector<float> train_kmeans(const float* x, size_t n, size_t dim, size_t nlist, size_t iterations, uint64_t seed) {
  // Initial centroids: nlist distinct rows, by a seeded partial shuffle.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  RandomStream random(seed, StreamPurpose::kCoarseQuantizer, {n, nlist});
  for (size_t i = 0; i < nlist; ++i) std::swap(order[i], order[i + random.below(n - i)]);
  std::vector<float> centroids(nlist * dim);
  for (size_t c = 0; c < nlist; ++c) std::copy_n(x + order[c] * dim, dim, centroids.data() + c * dim);

  std::vector<uint32_t> assignment(n);
  std::vector<float> distance(n);
  std::vector<double> sums(nlist * dim);
  std::vector<size_t> counts(nlist);
  for (size_t iteration = 0; iteration < iterations; ++iteration) {
    assign_nearest(x, n, dim, centroids, squared_norms(centroids, dim), assignment.data(), distance.data());
    std::fill(sums.begin(), sums.end(), 0.0);
    std::fill(counts.begin(), counts.end(), size_t{0});
    for (size_t i = 0; i < n; ++i) {
      double* sum = sums.data() + assignment[i] * dim;
      for (size_t j = 0; j < dim; ++j) sum[j] += x[i * dim + j];
      ++counts[assignment[i]];
    }
    std::vector<bool> taken(n, false);
    for (size_t c = 0; c < nlist; ++c) {
      if (counts[c] > 0) {
        for (size_t j = 0; j < dim; ++j)
          centroids[c * dim + j] = static_cast<float>(sums[c * dim + j] / static_cast<double>(counts[c]));
        continue;
      }
      // An empty cluster restarts at the row farthest from its centroid (the lowest such row).
      size_t far = 0;
      float farthest = -1.0f;
      for (size_t i = 0; i < n; ++i)
        if (!taken[i] && distance[i] > farthest) {
          farthest = distance[i];
          far = i;
        }
      taken[far] = true;
      distance[far] = 0.0f;
      std::copy_n(x + far * dim, dim, centroids.data() + c * dim);
    }
  }
  return centroids;
}

}  // namespace kvsketch
