#include <gtest/gtest.h>

#include "kvsketch/codebook.hpp"
#include "core/require.hpp"

using namespace kvsketch;

// d * C(f_X, b): specs/turboquant.md section 3 (Gaussian limit = Max 1960; exact law at d = 128).
TEST(Codebook, GaussianLimitCosts) {
  const double expected[] = {0.363380, 0.117482, 0.034548, 0.009501, 0.002505};
  for (int b = 1; b <= 5; ++b)
    EXPECT_NEAR(lloyd_max_codebook(CoordinateLaw::kGaussian, 128, b).cost, expected[b - 1], 2e-4 * expected[b - 1])
        << "b=" << b;  // 4 significant digits
}

TEST(Codebook, ExactLawCostsAtD128) {
  const double expected[] = {0.360889, 0.116000, 0.033966, 0.009315};
  for (int b = 1; b <= 4; ++b)
    EXPECT_NEAR(lloyd_max_codebook(CoordinateLaw::kBeta, 128, b).cost, expected[b - 1], 5e-5 * expected[b - 1])
        << "b=" << b;
}

TEST(Codebook, ExactLawCostsAtOtherDimensions) {
  EXPECT_NEAR(lloyd_max_codebook(CoordinateLaw::kBeta, 64, 3).cost, 0.033391, 3e-6);
  EXPECT_NEAR(lloyd_max_codebook(CoordinateLaw::kBeta, 1536, 4).cost, 0.009485, 1e-6);
  EXPECT_NEAR(lloyd_max_codebook(CoordinateLaw::kBeta, 3072, 2).cost, 0.117420, 1e-5);
}

TEST(Codebook, CentroidsMatchThePaper) {
  const auto& one = lloyd_max_codebook(CoordinateLaw::kGaussian, 100, 1);
  EXPECT_NEAR(one.centroids_scaled[1], std::sqrt(2.0 / M_PI), 1e-5);  // +-sqrt(2/pi)/sqrt(d)
  EXPECT_NEAR(one.centroids[1], std::sqrt(2.0 / M_PI) / 10.0, 1e-6);
  const auto& two = lloyd_max_codebook(CoordinateLaw::kGaussian, 100, 2);
  EXPECT_NEAR(two.centroids_scaled[2], 0.4528, 1e-4);
  EXPECT_NEAR(two.centroids_scaled[3], 1.5104, 1e-4);
  const auto& four = lloyd_max_codebook(CoordinateLaw::kBeta, 128, 4);
  EXPECT_NEAR(four.centroids_scaled[15], 2.6889, 1e-4);
  EXPECT_NEAR(four.centroids_scaled[8], 0.1279, 1e-4);
}

TEST(Codebook, ShapeAndMonotonicity) {
  for (int b = 0; b <= 8; ++b) {
    const auto& book = lloyd_max_codebook(CoordinateLaw::kBeta, 200, b);
    ASSERT_EQ(book.centroids.size(), size_t{1} << b);
    ASSERT_EQ(book.boundaries.size(), (size_t{1} << b) - 1);
    for (size_t i = 1; i < book.centroids.size(); ++i) {
      EXPECT_LT(book.centroids[i - 1], book.boundaries[i - 1]);
      EXPECT_LT(book.boundaries[i - 1], book.centroids[i]);
    }
    if (b > 0) {
      EXPECT_LT(book.cost, lloyd_max_codebook(CoordinateLaw::kBeta, 200, b - 1).cost);
    }
  }
  EXPECT_NEAR(lloyd_max_codebook(CoordinateLaw::kBeta, 200, 0).cost, 1.0, 1e-6);
}

TEST(Codebook, EntropyRemarkAtFourBits) {
  // Appendix C.1: the b = 4 index entropy is about 3.8 bits (computed: 3.765).
  const auto& book = lloyd_max_codebook(CoordinateLaw::kGaussian, 128, 4);
  double entropy = 0;
  for (double p : book.cell_probability) entropy -= p * std::log2(p);
  EXPECT_NEAR(entropy, 3.765, 0.002);
}

TEST(Codebook, RejectsBadArguments) {
  EXPECT_THROW(lloyd_max_codebook(CoordinateLaw::kBeta, 128, 9), Error);
  EXPECT_THROW(lloyd_max_codebook(CoordinateLaw::kBeta, 1, 2), Error);
}
