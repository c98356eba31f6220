// nearest_centroids: the tile kernel's dot products only narrow the choice; the centroids it picks
// are exactly those that ranking every similarity by fixed_order_dot picks, near ties included.
#include <gtest/gtest.h>

#include <algorithm>
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
  for (const size_t dim : {size_t{7}, size_t{64}, size_t{300}}) {
    const size_t nlist = 61, n = 45;
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
            << "dim " << dim << " top " << top << (metric ? " l2" : " ip");
        for (size_t i = 0; i < n * top; ++i)
          ASSERT_EQ(dots[i], simd::fixed_order_dot(x.data() + i / top * dim, centroids.data() + lists[i] * dim, dim));
      }
    }
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
