#include <gtest/gtest.h>

#include "core/require.hpp"
#include "kvsketch/transform.hpp"
#include "test_util.hpp"

using namespace kvsketch;
using kvsketch::testutil::gaussian_matrix;

namespace {

// Checks ||Pi x|| = ||x||, Pi^T Pi x = x, and <Pi x, Pi y> = <x, y>.
void expect_orthogonal(const Rotation& rotation, uint64_t seed) {
  const size_t d = rotation.dim();
  auto data = gaussian_matrix(3, d, seed);
  std::vector<float> x(data.begin(), data.begin() + d), y(data.begin() + d, data.begin() + 2 * d);
  std::vector<float> e1(d, 0.0f);
  e1[0] = 1.0f;
  for (const auto& v : {x, e1}) {
    std::vector<float> rotated(d), back(d);
    rotation.apply(v.data(), rotated.data());
    EXPECT_NEAR(testutil::norm(rotated.data(), d) / testutil::norm(v.data(), d), 1.0, 1e-6) << rotation.name() << " d=" << d;
    rotation.apply_transpose(rotated.data(), back.data());
    for (size_t j = 0; j < d; ++j) ASSERT_NEAR(back[j], v[j], 2e-6 * testutil::norm(v.data(), d)) << "d=" << d;
  }
  std::vector<float> rx(d), ry(d);
  rotation.apply(x.data(), rx.data());
  rotation.apply(y.data(), ry.data());
  EXPECT_NEAR(testutil::dot(rx.data(), ry.data(), d), testutil::dot(x.data(), y.data(), d),
              1e-5 * testutil::norm(x.data(), d) * testutil::norm(y.data(), d));
}

}  // namespace

TEST(Rotation, HadamardIsOrthogonalForAnyDimension) {
  for (size_t d : {1, 2, 3, 80, 96, 100, 128, 200, 784, 1536, 3072})
    for (int rounds : {1, 2, 3}) expect_orthogonal(RandomizedHadamard(d, rounds, 9), d);
}

TEST(Rotation, HaarIsOrthogonal) {
  for (size_t d : {2, 80, 96, 100, 128, 200, 784}) expect_orthogonal(HaarRotation(d, 3), d);
}

TEST(Rotation, OneHadamardRoundFlattensBasisVectors) {
  // The failure mode of a single round (specs/turboquant.md 8.1): H D e1 is +-1/sqrt(d) everywhere.
  const size_t d = 128;
  std::vector<float> e1(d, 0.0f), out(d);
  e1[5] = 1.0f;
  RandomizedHadamard(d, 1, 4).apply(e1.data(), out.data());
  for (float v : out) EXPECT_NEAR(std::abs(v), 1.0 / std::sqrt(128.0), 1e-7);
  RandomizedHadamard(d, 2, 4).apply(e1.data(), out.data());
  int distinct_magnitudes = 0;
  for (float v : out) distinct_magnitudes += std::abs(std::abs(v) - 1.0 / std::sqrt(128.0)) > 1e-3;
  EXPECT_GT(distinct_magnitudes, 64);
}

TEST(Rotation, SameSeedSameTransform) {
  auto x = gaussian_matrix(1, 200, 1);
  std::vector<float> a(200), b(200), c(200);
  RandomizedHadamard(200, 2, 77).apply(x.data(), a.data());
  RandomizedHadamard(200, 2, 77).apply(x.data(), b.data());
  RandomizedHadamard(200, 2, 78).apply(x.data(), c.data());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Rotation, ApplyScaledIsScaleThenApplyToTheBit) {
  // The encoders rotate x / ||x|| in one pass; it must be the codes of scaling a copy first.
  for (size_t d : {3, 100, 128, 1536}) {
    auto x = gaussian_matrix(1, d, 5);
    const float scale = 0.3719f;
    std::vector<float> scaled(d), expected(d), got(d), in_place(x);
    for (size_t j = 0; j < d; ++j) scaled[j] = x[j] * scale;
    for (const auto& rotation : {make_rotation(RotationKind::kHadamard, d, 2), make_rotation(RotationKind::kHaar, d, 2)}) {
      if (d > 200 && rotation->name() == "haar") continue;
      rotation->apply(scaled.data(), expected.data());
      rotation->apply_scaled(x.data(), scale, got.data());
      EXPECT_EQ(got, expected) << rotation->name() << " d=" << d;
      in_place = x;
      rotation->apply_scaled(in_place.data(), scale, in_place.data());
      EXPECT_EQ(in_place, expected) << rotation->name() << " in place, d=" << d;
    }
  }
}

TEST(Rotation, RejectsBadArguments) {
  EXPECT_THROW(RandomizedHadamard(0, 2, 1), Error);
  EXPECT_THROW(RandomizedHadamard(16, 0, 1), Error);
}

TEST(Sketch, OrthogonalAndHadamardRowsHaveNormSqrtD) {
  const size_t d = 96, m = 200;
  for (SketchKind kind : {SketchKind::kOrthogonal, SketchKind::kHadamard}) {
    Sketch sketch(kind, m, d, 5);
    // Row r of S is S^T e_r.
    for (size_t r : {0, 50, 95, 96, 199}) {
      std::vector<float> e(m, 0.0f), row(d, 0.0f);
      e[r] = 1.0f;
      sketch.project_transpose_add(e.data(), row.data());
      EXPECT_NEAR(testutil::norm(row.data(), d), std::sqrt(96.0), 1e-4) << sketch_kind_name(kind) << " row " << r;
    }
    // Rows inside one block are orthogonal: S S^T restricted to the block is d I.
    std::vector<float> e0(m, 0.0f), e1(m, 0.0f), r0(d, 0.0f), r1(d, 0.0f);
    e0[3] = 1.0f;
    e1[40] = 1.0f;
    sketch.project_transpose_add(e0.data(), r0.data());
    sketch.project_transpose_add(e1.data(), r1.data());
    EXPECT_NEAR(testutil::dot(r0.data(), r1.data(), d), 0.0, 1e-3);
  }
}

TEST(Sketch, ProjectMatchesTranspose) {
  const size_t d = 80, m = 130;
  for (SketchKind kind : {SketchKind::kGaussian, SketchKind::kOrthogonal, SketchKind::kHadamard}) {
    Sketch sketch(kind, m, d, 6);
    auto x = gaussian_matrix(1, d, 1);
    auto z = gaussian_matrix(1, m, 2);
    std::vector<float> sx(m), stz(d, 0.0f);
    sketch.project(x.data(), sx.data());
    sketch.project_transpose_add(z.data(), stz.data());
    EXPECT_NEAR(testutil::dot(sx.data(), z.data(), m), testutil::dot(x.data(), stz.data(), d), 1e-3);
  }
}

TEST(Sketch, SphereRowBiasFactor) {
  EXPECT_NEAR(sphere_row_bias_factor(128), 1.001955, 1e-6);  // specs/qjl.md 1.5
  EXPECT_NEAR(sphere_row_bias_factor(1536), 1.0 + 1.0 / (4 * 1536), 1e-6);
}
