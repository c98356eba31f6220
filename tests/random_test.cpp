#include <gtest/gtest.h>

#include <cmath>

#include "kvsketch/random.hpp"

using namespace kvsketch;

TEST(Random, PortableLogMatchesLibm) {
  for (double x : {1e-300, 1e-10, 0.001, 0.3, 0.5, 0.7071, 1.0, 1.5, 2.0, 10.0, 12345.678, 1e300}) {
    EXPECT_NEAR(portable_log(x), std::log(x), 4e-16 * std::max(1.0, std::abs(std::log(x)))) << x;
  }
}

TEST(Random, StreamsAreReproducibleAndDistinct) {
  RandomStream a(42, StreamPurpose::kRotation, {1, 2}), b(42, StreamPurpose::kRotation, {1, 2});
  RandomStream c(42, StreamPurpose::kRotation, {1, 3}), d(42, StreamPurpose::kSketch, {1, 2});
  for (int i = 0; i < 100; ++i) {
    const uint64_t va = a.next_u64();
    EXPECT_EQ(va, b.next_u64());
    EXPECT_NE(va, c.next_u64());
    EXPECT_NE(va, d.next_u64());
  }
}

// Golden values: these must be the same on every machine, compiler and standard library.
TEST(Random, GoldenValues) {
  RandomStream stream(2024);
  EXPECT_EQ(stream.next_u64(), 1029197146548041518ull);
  RandomStream gaussian(7, StreamPurpose::kTest, {3});
  double sum = 0;
  for (int i = 0; i < 1000; ++i) sum += gaussian.gaussian();
  EXPECT_EQ(sum, -27.88018109612927);
}

TEST(Random, GaussianMoments) {
  RandomStream stream(11);
  const int n = 400000;
  double s1 = 0, s2 = 0, s4 = 0;
  for (int i = 0; i < n; ++i) {
    const double g = stream.gaussian();
    s1 += g;
    s2 += g * g;
    s4 += g * g * g * g;
  }
  EXPECT_NEAR(s1 / n, 0.0, 4.0 / std::sqrt(n));
  EXPECT_NEAR(s2 / n, 1.0, 4.0 * std::sqrt(2.0 / n));
  EXPECT_NEAR(s4 / n, 3.0, 4.0 * std::sqrt(96.0 / n));
}

TEST(Random, BelowIsUniform) {
  RandomStream stream(5);
  int counts[7] = {};
  const int n = 70000;
  for (int i = 0; i < n; ++i) ++counts[stream.below(7)];
  for (int c : counts) EXPECT_NEAR(c, n / 7.0, 4.0 * std::sqrt(n / 7.0));
}
