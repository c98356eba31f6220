#include "ann/kmeans.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "ann/top_k.hpp"
#include "kvsketch/random.hpp"
#include "simd/amx.hpp"
#include "simd/bf16_panel.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {

std::vector<float> squared_norms(const std::vector<float>& centroids, size_t dim) {
  const size_t nlist = centroids.size() / dim;
  std::vector<float> out(nlist);
  for (size_t c = 0; c < nlist; ++c) out[c] = simd::sum_of_squares(centroids.data() + c * dim, dim);
  return out;
}

namespace {

// ||x - c||^2 as assign_nearest reports it: (||c||^2 - 2 <x, c>) + ||x||^2, from the fixed-order
// dot product; k-means' restarts rank rows by it.
float squared_distance(const float* row, size_t dim, float centroid_square, float dot) {
  return (centroid_square - 2.0f * dot) + simd::sum_of_squares(row, dim);
}

}  // namespace

void nearest_centroids(const float* x, size_t n, size_t dim, const std::vector<float>& centroids,
                       const std::vector<float>* squared, size_t top, uint32_t* lists, float* dots) {
  const size_t nlist = centroids.size() / dim;
  constexpr size_t kRowBlock = simd::kBf16PanelRows;
  // Packing the centroids for a panel kernel costs a pass over them: worth it from a few dozen
  // rows (k-means, adds, batches of queries); fewer rows (a query) take the row-major tiles. With
  // an AMX-BF16 unit the panel is a bf16 screen, many times faster, which leaves more to confirm.
  const bool panel = n >= 2 * kRowBlock;
  const bool amx = panel && simd::amx_bf16_usable();
  const size_t ldb = amx ? simd::bf16_panel_columns(nlist) : panel ? simd::dot_panel_columns(nlist) : nlist;
  std::vector<float> packed(panel && !amx ? dim * ldb : 0);
  std::vector<uint16_t> packed16(amx ? ldb * simd::bf16_panel_depth(dim) : 0);
  if (amx)
    simd::pack_bf16_panel(centroids.data(), nlist, dim, packed16.data());
  else if (panel)
    simd::pack_dot_panel(centroids.data(), nlist, dim, packed.data());
  // The norms in the screen's margins, rounded up; zeros for the float kernels, whose bound is one
  // for all.
  std::vector<float> margin_norms(nlist, 0.0f);
  float largest_square = 0.0f;
  for (size_t c = 0; c < nlist; ++c) {
    const float square = squared ? (*squared)[c] : simd::sum_of_squares(centroids.data() + c * dim, dim);
    largest_square = std::max(largest_square, square);
    if (amx) margin_norms[c] = std::nextafter(static_cast<float>(std::sqrt(static_cast<double>(square))), INFINITY);
  }
  const double largest_norm = std::sqrt(static_cast<double>(largest_square));
  // Two float dot products of length dim (any order, fused or not) differ by at most
  // 2 gamma_dim ||x|| ||c||; l2 doubles it and rounds once more. Twice that again, for safety.
  constexpr double kUnit = 1.0 / (1 << 24);
  const double gamma = static_cast<double>(dim) * kUnit / (1.0 - static_cast<double>(dim) * kUnit);
  // The bf16 screen against the fixed-order dot product: its own error against the exact one, and
  // the fixed order's.
  const double screen_relative = amx ? simd::bf16_panel_relative_error(dim) + gamma : 0.0;
  const double screen_absolute = amx ? simd::bf16_panel_absolute_error(dim) : 0.0;
  const double scale = squared ? 2.0 : 1.0;
  const size_t blocks = (n + kRowBlock - 1) / kRowBlock;
#pragma omp parallel
  {
    std::vector<float> similarity(kRowBlock * ldb), cut(nlist), confirmed_dot(nlist);
    std::vector<uint32_t> chosen(nlist);
#pragma omp for schedule(dynamic, 1)
    for (size_t block = 0; block < blocks; ++block) {
      const size_t first = block * kRowBlock, rows = std::min(kRowBlock, n - first);
      if (amx)
        simd::bf16_dot_panel(x + first * dim, rows, packed16.data(), ldb, dim, similarity.data(), ldb);
      else if (panel)
        simd::dot_panel(x + first * dim, rows, packed.data(), ldb, dim, similarity.data(), ldb);
      else
        simd::dot_tile(x + first * dim, rows, centroids.data(), nlist, dim, similarity.data(), ldb);
      for (size_t i = 0; i < rows; ++i) {
        const float* row = x + (first + i) * dim;
        float* s = similarity.data() + i * ldb;
        const double norm = std::sqrt(static_cast<double>(simd::sum_of_squares(row, dim)));
        // Which centroids could be among the top. With one bound for all (the float kernels): those
        // within twice the bound of the top-th largest similarity. With a margin per centroid (the
        // bf16 screen, whose error grows with ||c||): those whose upper bound reaches the top-th
        // largest lower bound.
        float base = 0.0f, slope = 0.0f;
        if (amx) {
          // margin = scale (relative ||x|| ||c|| + absolute (||x|| + ||c|| + 2)) + the rounding of the
          // l2 form and of the margin itself, linear in ||c||. The screen's bound is proven, not
          // estimated, so it takes a small allowance, not a factor: every centroid inside it is
          // scored again, the costlier half of the screen.
          constexpr double kAllowance = 1.0 + 1.0 / 64;
          base = static_cast<float>(kAllowance * (scale * screen_absolute * (norm + 2.0) + 4.0 * kUnit * largest_square));
          slope = static_cast<float>(
              kAllowance * (scale * (screen_relative * norm + screen_absolute) + 4.0 * kUnit * scale * norm));
        }
        // Turns s into similarities; `cut` gets the lower bounds.
        float cut_value = simd::screen_lower_bounds(s, squared ? squared->data() : nullptr, margin_norms.data(), base,
                                                    slope, nlist, cut.data());
        if (top != 1) {  // the top-th largest lower bound; k-means asks for the largest, found in passing
          std::nth_element(cut.begin(), cut.begin() + static_cast<std::ptrdiff_t>(top - 1), cut.end(), std::greater<>());
          cut_value = cut[top - 1];
        }
        const double product = norm * largest_norm;
        const double bound =
            amx ? 0.0 : 2.0 * (scale * 2.0 * gamma * product + 4.0 * kUnit * (scale * product + largest_square));
        const float threshold = static_cast<float>(static_cast<double>(cut_value) - 2.0 * bound);
        // Every centroid whose similarity could reach the cut, in the fixed order; all of them when
        // the bound is no bound (similarities that overflow float).
        const bool bounded = std::isfinite(threshold) && std::isfinite(norm);
        TopK best(top);
        const auto confirm = [&](size_t c) {
          const float dot = simd::fixed_order_dot(row, centroids.data() + c * dim, dim);
          confirmed_dot[c] = dot;
          best.push({squared ? 2.0f * dot - (*squared)[c] : dot, static_cast<uint32_t>(c)});
        };
        size_t confirmed = nlist;
        if (bounded)
          confirmed = simd::screen_select(s, margin_norms.data(), base, slope, threshold, nlist, chosen.data());
        else
          std::iota(chosen.begin(), chosen.end(), uint32_t{0});
        for (size_t k = 0; k < confirmed; ++k) confirm(chosen[k]);
        if (confirmed < top) {  // NaN similarities fell out of the approximate cut: rank them all
          best = TopK(top);
          for (size_t c = 0; c < nlist; ++c) confirm(c);
        }
        const std::vector<ScoredRow> kept = best.take_sorted();
        for (size_t r = 0; r < top; ++r) {
          lists[(first + i) * top + r] = kept[r].row;
          if (dots) dots[(first + i) * top + r] = confirmed_dot[kept[r].row];
        }
      }
    }
  }
}

void assign_nearest(const float* x, size_t n, size_t dim, const std::vector<float>& centroids,
                    const std::vector<float>& squared, uint32_t* assignment, float* distance) {
  std::vector<float> dots(n);
  nearest_centroids(x, n, dim, centroids, &squared, 1, assignment, dots.data());
  if (distance)
    for (size_t i = 0; i < n; ++i) distance[i] = squared_distance(x + i * dim, dim, squared[assignment[i]], dots[i]);
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
  std::vector<float> distance, squared;
  std::vector<double> sums(nlist * dim);
  std::vector<size_t> counts(nlist), starts(nlist + 1, 0), next(nlist);
  std::vector<uint32_t> members(n);
  std::vector<bool> taken;
  for (size_t iteration = 0; iteration < iterations; ++iteration) {
    squared = squared_norms(centroids, dim);
    nearest_centroids(x, n, dim, centroids, &squared, 1, assignment.data(), nullptr);
    // Each cluster's sum in row order (the same bits on any thread count), clusters in parallel:
    // the rows by cluster first, by a counting sort.
    std::fill(counts.begin(), counts.end(), size_t{0});
    for (size_t i = 0; i < n; ++i) ++counts[assignment[i]];
    for (size_t c = 0; c < nlist; ++c) starts[c + 1] = starts[c] + counts[c];
    std::copy(starts.begin(), starts.end() - 1, next.begin());
    for (size_t i = 0; i < n; ++i) members[next[assignment[i]]++] = static_cast<uint32_t>(i);
#pragma omp parallel for schedule(dynamic, 16)
    for (size_t c = 0; c < nlist; ++c) {
      double* sum = sums.data() + c * dim;
      std::fill(sum, sum + dim, 0.0);
      for (size_t m = starts[c]; m < starts[c + 1]; ++m) simd::add_to_double_sums(x + members[m] * dim, sum, dim);
    }
    // An empty cluster restarts at the row farthest from its centroid (the lowest such row), by the
    // squared distances of assign_nearest, taken only in an iteration that empties one (they cost a
    // pass over the rows).
    distance.clear();
    taken.assign(n, false);
    for (size_t c = 0; c < nlist; ++c) {
      if (counts[c] > 0) continue;
      if (distance.empty()) {
        distance.resize(n);
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; ++i) {
          const float dot = simd::fixed_order_dot(x + i * dim, centroids.data() + assignment[i] * dim, dim);
          distance[i] = squared_distance(x + i * dim, dim, squared[assignment[i]], dot);
        }
      }
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
    // Then the means: a restarted centroid above is not a mean, and no distance above reads a mean.
    for (size_t c = 0; c < nlist; ++c)
      if (counts[c] > 0)
        for (size_t j = 0; j < dim; ++j)
          centroids[c * dim + j] = static_cast<float>(sums[c * dim + j] / static_cast<double>(counts[c]));
  }
  return centroids;
}

}  // namespace kvsketch
