// nearest_centroids: the tile kernel's dot products only narrow the choice; the centroids it picks
// are exactly those that ranking every similarity by fixed_order_dot picks, near ties included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ann/kmeans.hpp"
#include "ann/top_k.hpp"
#include "simd/kernels.hpp"
#include "test_util.hpp"

namespace kvsketch {
namespace {

// The reference: every similarity in the fixed order, ranked with ties to the lower centroid.
std::vector<uint32_t> brute_force(const std::vector<float>& x, size_t n, size_t dim, const std::vector<float>& centroids,
                                  const std::vector<float>* squared, size_t top) {
  const size_t nlist = centroids.size() / dim;
  std::vector<uint32_t> out;
  for (size_t i = 0; i < n; ++i) {
    TopK best(top);
    for (size_t c = 0; c < nlist; ++c) {
      const float dot = simd::fixed_order_dot(x.data() + i * dim, centroids.data() + c * dim, dim);
      best.push({squared ? 2.0f * dot - (*squared)[c] : dot, static_cast<uint32_t>(c)});
    }
    for (const ScoredRow& row : best.take_sorted()) out.push_back(row.row);
  }
  return out;
}

TEST(CoarseQuantizer, PicksWhatFixedOrderRankingPicksEvenAtNearTies) {
  // 45 rows take the row-major tiles, 130 the packed panels.
  for (const auto& [dim, n] : {std::pair<size_t, size_t>{7, 45}, {64, 45}, {300, 45}, {7, 130}, {64, 130}, {300, 130}}) {
    const size_t nlist = 61;
    std::vector<float> centroids = testutil::gaussian_matrix(nlist, dim, 1);
    // Near ties: copies of centroid 0 (exact ties), and of centroid 1 nudged by one ulp-sized step.
    for (size_t j = 0; j < dim; ++j) {
      centroids[5 * dim + j] = centroids[j];
      centroids[9 * dim + j] = centroids[dim + j] * (1.0f + 1e-7f);
      centroids[13 * dim + j] = centroids[dim + j] * (1.0f - 1e-7f);
    }
    std::vector<float> x = testutil::gaussian_matrix(n, dim, 2);
    // Rows on the centroids themselves, and midway between two.
    for (size_t j = 0; j < dim; ++j) {
      x[j] = centroids[j];
      x[dim + j] = centroids[dim + j];
      x[2 * dim + j] = 0.5f * (centroids[2 * dim + j] + centroids[3 * dim + j]);
    }
    const std::vector<float> squared = squared_norms(centroids, dim);
    for (const size_t top : {size_t{1}, size_t{4}, nlist}) {
      for (const std::vector<float>* metric : {&squared, static_cast<const std::vector<float>*>(nullptr)}) {
        std::vector<uint32_t> lists(n * top);
        std::vector<float> dots(n * top);
        nearest_centroids(x.data(), n, dim, centroids, metric, top, lists.data(), dots.data());
        EXPECT_EQ(lists, brute_force(x, n, dim, centroids, metric, top))
            << "dim " << dim << " rows " << n << " top " << top << (metric ? " l2" : " ip");
        for (size_t i = 0; i < n * top; ++i)
          ASSERT_EQ(dots[i], simd::fixed_order_dot(x.data() + i / top * dim, centroids.data() + lists[i] * dim, dim));
      }
    }
  }
}

// The row-major tiles and the panel kernel against fixed-order dot products, over tile edges (rows past a tile of 8 or 4,
// columns past a panel of 48 or 16, a strip of 16), on the instruction set chosen at run time.
TEST(CoarseQuantizer, TileAndPanelKernelsGiveEveryDotProductWithinTheBound) {
  for (const size_t n : {size_t{1}, size_t{5}, size_t{64}, size_t{131}})
    for (const size_t nb : {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{50}, size_t{97}})
      for (const size_t na : {size_t{1}, size_t{7}, size_t{9}, size_t{19}}) {
        const std::vector<float> a = testutil::gaussian_matrix(na, n, 5), b = testutil::gaussian_matrix(nb, n, 6);
        const size_t columns = simd::dot_panel_columns(nb);
        std::vector<float> packed(columns * n), out(na * columns + 3, 7.0f);
        simd::pack_dot_panel(b.data(), nb, n, packed.data());
        simd::dot_panel(a.data(), na, packed.data(), columns, n, out.data(), columns);
        std::vector<float> tiled(na * nb);
        simd::dot_tile(a.data(), na, b.data(), nb, n, tiled.data(), nb);
        for (size_t i = 0; i < na; ++i)
          for (size_t j = 0; j < columns; ++j) {
            const float got = out[i * columns + j];
            if (j >= nb) {
              ASSERT_EQ(got, 0.0f) << "padding column " << j;
              continue;
            }
            float magnitude = 0.0f;
            for (size_t k = 0; k < n; ++k) magnitude += std::abs(a[i * n + k] * b[j * n + k]);
            const float bound = 2.0f * static_cast<float>(n) * 6e-8f * magnitude + 1e-30f;
            const float exact = simd::fixed_order_dot(a.data() + i * n, b.data() + j * n, n);
            ASSERT_NEAR(got, exact, bound) << "n " << n << " nb " << nb << " na " << na << " at " << i << "," << j;
            ASSERT_NEAR(tiled[i * nb + j], exact, bound) << "row-major tiles, n " << n << " at " << i << "," << j;
          }
        for (size_t t = na * columns; t < out.size(); ++t) ASSERT_EQ(out[t], 7.0f) << "wrote past the rows";
      }
}

// Centroids whose squares overflow float (a corrupt or hostile index file) give NaN and -inf
// similarities: no candidate passes the approximate cut, and every centroid is ranked exactly.
TEST(CoarseQuantizer, RanksOverflowingSimilaritiesWithoutACut) {
  const size_t dim = 8, nlist = 6, n = 3;
  std::vector<float> centroids = testutil::gaussian_matrix(nlist, dim, 3);
  for (float& v : centroids) v *= 1e20f;
  const std::vector<float> x = testutil::gaussian_matrix(n, dim, 4);
  const std::vector<float> squared = squared_norms(centroids, dim);
  for (const size_t top : {size_t{1}, size_t{3}}) {
    std::vector<uint32_t> lists(n * top);
    std::vector<float> dots(n * top);
    nearest_centroids(x.data(), n, dim, centroids, &squared, top, lists.data(), dots.data());
    EXPECT_EQ(lists, brute_force(x, n, dim, centroids, &squared, top));
  }
}

}  // namespace
}  // namespace kvsketch
