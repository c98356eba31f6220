// nearest_centroids: the tile kernel's dot products only narrow the choice; the centroids it picks
// are exactly those that ranking every similarity by fixed_order_dot picks, near ties included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <cstdio>
#include <vector>

#include "ann/kmeans.hpp"
#include "ann/top_k.hpp"
#include "kvsketch/random.hpp"
#include "simd/amx.hpp"
#include "simd/bf16_panel.hpp"
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

// Runs `body` with the AMX-BF16 screen on (where the machine has it) and off.
template <typename Body>
void with_and_without_amx(Body body) {
  std::printf("AMX-BF16 screen %s on this machine\n", simd::amx_bf16_usable() ? "runs" : "does not run");
  for (const bool amx : {true, false}) {
    if (amx && !simd::amx_bf16_usable()) continue;
    const bool previous = simd::set_amx_allowed(amx);
    body(amx);
    simd::set_amx_allowed(previous);
  }
}

TEST(CoarseQuantizer, PicksWhatFixedOrderRankingPicksEvenAtNearTies) {
  with_and_without_amx([](bool amx) {
  // 45 rows take the row-major tiles, 130 the packed panels (the bf16 screen where AMX runs).
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
            << "dim " << dim << " rows " << n << " top " << top << (metric ? " l2" : " ip") << (amx ? " amx" : "");
        for (size_t i = 0; i < n * top; ++i)
          ASSERT_EQ(dots[i], simd::fixed_order_dot(x.data() + i / top * dim, centroids.data() + lists[i] * dim, dim));
      }
    }
  }
  });
}

// Clustered rows, as k-means sees them: many centroids at nearly the same distance. The screen's
// candidates must still hold the exact choice, so the assignment is the same with and without it.
TEST(CoarseQuantizer, ScreenedAssignmentEqualsTheFloatKernelsOnClusteredRows) {
  const size_t dim = 96, nlist = 200, n = 3000;
  std::vector<float> centroids = testutil::gaussian_matrix(nlist, dim, 11);
  std::vector<float> x = testutil::gaussian_matrix(n, dim, 12);
  for (size_t i = 0; i < n; ++i)  // each row a centroid plus 3% noise, some scaled far from unit norm
    for (size_t j = 0; j < dim; ++j)
      x[i * dim + j] = (centroids[(i % nlist) * dim + j] + 0.03f * x[i * dim + j]) * (i % 7 == 0 ? 1e3f : 1.0f);
  const std::vector<float> squared = squared_norms(centroids, dim);
  std::vector<std::vector<uint32_t>> runs;
  with_and_without_amx([&](bool) {
    for (const std::vector<float>* metric : {&squared, static_cast<const std::vector<float>*>(nullptr)}) {
      std::vector<uint32_t> lists(n * 5);
      nearest_centroids(x.data(), n, dim, centroids, metric, 5, lists.data(), nullptr);
      runs.push_back(lists);
    }
  });
  EXPECT_EQ(runs[0], brute_force(x, n, dim, centroids, &squared, 5));
  EXPECT_EQ(runs[1], brute_force(x, n, dim, centroids, nullptr, 5));
  if (runs.size() == 4) {
    EXPECT_EQ(runs[0], runs[2]);
    EXPECT_EQ(runs[1], runs[3]);
  }
}

// Lloyd's k-means as train_kmeans defines it, scoring every row against every centroid in the fixed
// order and summing clusters in row order: train_kmeans screens with whatever kernel the machine
// has, sums clusters in parallel and takes distances only when a cluster empties, and must give
// these centroids bit for bit.
std::vector<float> reference_kmeans(const std::vector<float>& x, size_t n, size_t dim, size_t nlist, size_t iterations,
                                    uint64_t seed) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  RandomStream random(seed, StreamPurpose::kCoarseQuantizer, {n, nlist});
  for (size_t i = 0; i < nlist; ++i) std::swap(order[i], order[i + random.below(n - i)]);
  std::vector<float> centroids(nlist * dim);
  for (size_t c = 0; c < nlist; ++c) std::copy_n(x.data() + order[c] * dim, dim, centroids.data() + c * dim);
  for (size_t iteration = 0; iteration < iterations; ++iteration) {
    const std::vector<float> squared = squared_norms(centroids, dim);
    const std::vector<uint32_t> assignment = brute_force(x, n, dim, centroids, &squared, 1);
    std::vector<double> sums(nlist * dim, 0.0);
    std::vector<size_t> counts(nlist, 0);
    std::vector<float> distance(n);
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < dim; ++j) sums[assignment[i] * dim + j] += x[i * dim + j];
      ++counts[assignment[i]];
      const float dot = simd::fixed_order_dot(x.data() + i * dim, centroids.data() + assignment[i] * dim, dim);
      distance[i] = (squared[assignment[i]] - 2.0f * dot) + simd::sum_of_squares(x.data() + i * dim, dim);
    }
    std::vector<bool> taken(n, false);
    for (size_t c = 0; c < nlist; ++c) {
      if (counts[c] > 0) {
        for (size_t j = 0; j < dim; ++j)
          centroids[c * dim + j] = static_cast<float>(sums[c * dim + j] / static_cast<double>(counts[c]));
        continue;
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
      std::copy_n(x.data() + far * dim, dim, centroids.data() + c * dim);
    }
  }
  return centroids;
}

TEST(KMeans, ScreenAndParallelSumsGiveLloydsCentroidsBitForBit) {
  // Unclustered rows (many near the boundaries), clustered ones, duplicate rows and more centroids
  // than clusters (empty clusters restart), in l2.
  struct Case {
    size_t n, dim, nlist, clusters;
    float spread;
  };
  for (const Case& c : {Case{3000, 16, 50, 1, 0.0f}, Case{2000, 48, 64, 16, 4.0f}, Case{1500, 130, 40, 40, 1.0f},
                        Case{300, 8, 120, 5, 4.0f}}) {
    std::vector<float> x = testutil::gaussian_matrix(c.n, c.dim, 21);
    const std::vector<float> centres = testutil::gaussian_matrix(c.clusters, c.dim, 22);
    for (size_t i = 0; i < c.n; ++i)
      for (size_t j = 0; j < c.dim; ++j)
        x[i * c.dim + j] = c.spread * centres[(i * 7 % c.clusters) * c.dim + j] + (i % 5 == 0 ? 0.0f : 0.5f * x[i * c.dim + j]);
    const std::vector<float> expected = reference_kmeans(x, c.n, c.dim, c.nlist, 10, 5);
    with_and_without_amx([&](bool amx) {
      EXPECT_EQ(train_kmeans(x.data(), c.n, c.dim, c.nlist, 10, 5), expected)
          << c.n << " x " << c.dim << ", nlist " << c.nlist << (amx ? ", amx" : "");
    });
  }
}

TEST(Bf16Panel, RoundsToNearestEvenAndKeepsNaNAndInfinity) {
  EXPECT_EQ(simd::from_bf16(simd::to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(simd::from_bf16(simd::to_bf16(1.0f + 0x1p-8f)), 1.0f);                   // tie, to even
  EXPECT_EQ(simd::from_bf16(simd::to_bf16(1.0f + 3 * 0x1p-8f)), 1.0f + 0x1p-6f);     // tie, to even (up)
  EXPECT_EQ(simd::from_bf16(simd::to_bf16(1.0f + 0x1p-8f + 0x1p-20f)), 1.0f + 0x1p-7f);  // past the tie
  EXPECT_EQ(simd::from_bf16(simd::to_bf16(-2.5f)), -2.5f);
  EXPECT_TRUE(std::isnan(simd::from_bf16(simd::to_bf16(std::nanf("")))));
  EXPECT_EQ(simd::from_bf16(simd::to_bf16(INFINITY)), INFINITY);
  EXPECT_EQ(simd::from_bf16(simd::to_bf16(3.4e38f)), INFINITY);  // past bf16's largest finite value
  for (const float v : testutil::gaussian_matrix(1, 1000, 9)) {
    const float rounded = simd::from_bf16(simd::to_bf16(v));
    ASSERT_LE(std::abs(rounded - v), std::abs(v) * 0x1p-8f) << v;
  }
}

// The AMX product against exact (double) dot products: every error within the documented bound,
// over tile edges (rows 1-32, columns past a strip, depths past a block of 32), and the bound not
// so loose that it would screen nothing.
TEST(Bf16Panel, EveryDotProductWithinTheBound) {
  if (!simd::amx_bf16_usable()) GTEST_SKIP() << "no usable AMX-BF16 unit on this machine";
  double worst_ratio = 0.0;
  for (const size_t n : {size_t{1}, size_t{31}, size_t{32}, size_t{100}, size_t{784}})
    for (const size_t nb : {size_t{1}, size_t{16}, size_t{17}, size_t{50}})
      for (const size_t na : {size_t{1}, size_t{16}, size_t{17}, size_t{32}}) {
        const std::vector<float> a = testutil::gaussian_matrix(na, n, 5), b = testutil::gaussian_matrix(nb, n, 6);
        const size_t columns = simd::bf16_panel_columns(nb);
        std::vector<uint16_t> packed(columns * simd::bf16_panel_depth(n));
        simd::pack_bf16_panel(b.data(), nb, n, packed.data());
        std::vector<float> out(simd::kBf16PanelRows * columns, 7.0f);
        simd::bf16_dot_panel(a.data(), na, packed.data(), columns, n, out.data(), columns);
        for (size_t i = 0; i < na; ++i)
          for (size_t j = 0; j < columns; ++j) {
            const float got = out[i * columns + j];
            if (j >= nb) {
              ASSERT_EQ(got, 0.0f) << "padding column " << j;
              continue;
            }
            double exact = 0.0, na2 = 0.0, nb2 = 0.0;
            for (size_t k = 0; k < n; ++k) {
              exact += static_cast<double>(a[i * n + k]) * b[j * n + k];
              na2 += static_cast<double>(a[i * n + k]) * a[i * n + k];
              nb2 += static_cast<double>(b[j * n + k]) * b[j * n + k];
            }
            const double norm_a = std::sqrt(na2), norm_b = std::sqrt(nb2);
            const double bound = simd::bf16_panel_relative_error(n) * norm_a * norm_b +
                                 simd::bf16_panel_absolute_error(n) * (norm_a + norm_b + 2.0);
            ASSERT_LE(std::abs(got - exact), bound) << "n " << n << " nb " << nb << " na " << na << " at " << i << "," << j;
            worst_ratio = std::max(worst_ratio, std::abs(got - exact) / bound);
          }
        for (size_t t = na * columns; t < out.size(); ++t) ASSERT_EQ(out[t], 7.0f) << "wrote past the rows";
      }
  EXPECT_GT(worst_ratio, 0.01) << "the bound is far looser than the errors seen";
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
