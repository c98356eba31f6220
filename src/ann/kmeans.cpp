#include "ann/kmeans.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "ann/top_k.hpp"
#include "kvsketch/random.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {

std::vector<float> squared_norms(const std::vector<float>& centroids, size_t dim) {
  const size_t nlist = centroids.size() / dim;
  std::vector<float> out(nlist);
  for (size_t c = 0; c < nlist; ++c) out[c] = simd::sum_of_squares(centroids.data() + c * dim, dim);
  return out;
}

void nearest_centroids(const float* x, size_t n, size_t dim, const std::vector<float>& centroids,
                       const std::vector<float>* squared, size_t top, uint32_t* lists, float* dots) {
  const size_t nlist = centroids.size() / dim;
  constexpr size_t kRowBlock = 32;
  // Packing the centroids for the panel kernel costs a pass over them: worth it from a few dozen
  // rows (k-means, adds, batches of queries); fewer rows (a query) take the row-major tiles.
  const bool panel = n >= 2 * kRowBlock;
  const size_t ldb = panel ? simd::dot_panel_columns(nlist) : nlist;
  std::vector<float> packed(panel ? dim * ldb : 0);
  if (panel) simd::pack_dot_panel(centroids.data(), nlist, dim, packed.data());
  float largest_norm = 0.0f, largest_square = 0.0f;
  for (size_t c = 0; c < nlist; ++c) {
    const float square = squared ? (*squared)[c] : simd::sum_of_squares(centroids.data() + c * dim, dim);
    largest_square = std::max(largest_square, square);
  }
  largest_norm = std::sqrt(largest_square);
  // Two float dot products of length dim (any order, fused or not) differ by at most
  // 2 gamma_dim ||x|| ||c||; l2 doubles it and rounds once more. Twice that again, for safety.
  constexpr double kUnit = 1.0 / (1 << 24);
  const double gamma = static_cast<double>(dim) * kUnit / (1.0 - static_cast<double>(dim) * kUnit);
  const size_t blocks = (n + kRowBlock - 1) / kRowBlock;
#pragma omp parallel
  {
    std::vector<float> similarity(kRowBlock * ldb), cut(nlist);
#pragma omp for schedule(dynamic, 1)
    for (size_t block = 0; block < blocks; ++block) {
      const size_t first = block * kRowBlock, rows = std::min(kRowBlock, n - first);
      if (panel)
        simd::dot_panel(x + first * dim, rows, packed.data(), ldb, dim, similarity.data(), ldb);
      else
        simd::dot_tile(x + first * dim, rows, centroids.data(), nlist, dim, similarity.data(), ldb);
      for (size_t i = 0; i < rows; ++i) {
        const float* row = x + (first + i) * dim;
        float* s = similarity.data() + i * ldb;
        if (squared)
          for (size_t c = 0; c < nlist; ++c) s[c] = 2.0f * s[c] - (*squared)[c];
        // The top-th largest similarity; k-means asks for the largest, which a scan finds.
        float cut_value = -std::numeric_limits<float>::infinity();
        if (top == 1) {
          for (size_t c = 0; c < nlist; ++c) cut_value = std::max(cut_value, s[c]);
        } else {
          std::copy(s, s + nlist, cut.begin());
          std::nth_element(cut.begin(), cut.begin() + static_cast<std::ptrdiff_t>(top - 1), cut.end(), std::greater<>());
          cut_value = cut[top - 1];
        }
        const double norm = std::sqrt(static_cast<double>(simd::sum_of_squares(row, dim)));
        const double product = norm * largest_norm, scale = squared ? 2.0 : 1.0;
        const double bound =
            2.0 * (scale * 2.0 * gamma * product + 4.0 * kUnit * (scale * product + largest_square));
        const float threshold = static_cast<float>(static_cast<double>(cut_value) - 2.0 * bound);
        // Every centroid whose similarity could reach the cut, in the fixed order; all of them when
        // the bound is no bound (similarities that overflow float).
        const bool bounded = std::isfinite(threshold);
        TopK best(top);
        const auto confirm = [&](size_t c) {
          const float dot = simd::fixed_order_dot(row, centroids.data() + c * dim, dim);
          best.push({squared ? 2.0f * dot - (*squared)[c] : dot, static_cast<uint32_t>(c)});
        };
        size_t confirmed = 0;
        for (size_t c = 0; c < nlist; ++c)
          if (!bounded || s[c] >= threshold) {
            confirm(c);
            ++confirmed;
          }
        if (confirmed < top) {  // NaN similarities fell out of the approximate cut: rank them all
          best = TopK(top);
          for (size_t c = 0; c < nlist; ++c) confirm(c);
        }
        const std::vector<ScoredRow> kept = best.take_sorted();
        for (size_t r = 0; r < top; ++r) {
          lists[(first + i) * top + r] = kept[r].row;
          if (dots) dots[(first + i) * top + r] = simd::fixed_order_dot(row, centroids.data() + kept[r].row * dim, dim);
        }
      }
    }
  }
}

void assign_nearest(const float* x, size_t n, size_t dim, const std::vector<float>& centroids,
                    const std::vector<float>& squared, uint32_t* assignment, float* distance) {
  std::vector<float> dots(n);
  nearest_centroids(x, n, dim, centroids, &squared, 1, assignment, dots.data());
  // ||x - c||^2 = (||c||^2 - 2 <x, c>) + ||x||^2.
  if (distance)
    for (size_t i = 0; i < n; ++i)
      distance[i] = (squared[assignment[i]] - 2.0f * dots[i]) + simd::sum_of_squares(x + i * dim, dim);
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
      simd::add_to_double_sums(x + i * dim, sums.data() + assignment[i] * dim, dim);
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
