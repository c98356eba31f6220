// KIVI keys and values and q4_0: reconstruction within half a step, exact byte layouts, and the
// token groups of KIVI keys enforced.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "codec/codec_base.hpp"
#include "kvsketch/codec.hpp"
#include "core/require.hpp"
#include "kvsketch/half.hpp"
#include "test_util.hpp"

using namespace kvsketch;

namespace {

// Largest |decoded - x| over a group, relative to the group's range / (2^b - 1).
void expect_within_half_step(const std::string& spec, size_t dim, size_t rows, int bits, bool per_channel,
                             size_t group) {
  SCOPED_TRACE(spec);
  auto x = testutil::gaussian_matrix(rows, dim, 11, 2.0);
  for (size_t i = 0; i < rows; ++i) x[i * dim + 3] += 20.0f;  // an outlier channel
  auto codec = make_codec(spec, dim);
  auto codes = codec->make_buffer();
  codec->encode(x.data(), rows, codes);
  std::vector<float> decoded(rows * dim);
  codec->decode(codes, 0, rows, decoded.data());
  const float top = static_cast<float>((1 << bits) - 1);
  for (size_t i = 0; i < rows; ++i)
    for (size_t c = 0; c < dim; ++c) {
      // The range this value was quantized over: its channel over the token group, or its channel group.
      float low = INFINITY, high = -INFINITY;
      if (per_channel) {
        const size_t first = i / group * group;
        for (size_t t = first; t < first + group; ++t) {
          low = std::min(low, x[t * dim + c]);
          high = std::max(high, x[t * dim + c]);
        }
      } else {
        const size_t first = c / group * group;
        for (size_t k = first; k < std::min(dim, first + group); ++k) {
          low = std::min(low, x[i * dim + k]);
          high = std::max(high, x[i * dim + k]);
        }
      }
      const float step = (high - low) / top;
      // Half a step, plus the fp16 rounding of the minimum and the step (times the level).
      const float slack = 0.5f * step + 1e-3f * (std::abs(low) + std::abs(high)) + 1e-6f;
      ASSERT_NEAR(decoded[i * dim + c], x[i * dim + c], slack) << "row " << i << " channel " << c;
    }
}

}  // namespace

TEST(GroupQuantizer, KiviReconstructsWithinHalfAStep) {
  expect_within_half_step("kivi_k:b=2,group=32", 128, 96, 2, true, 32);
  expect_within_half_step("kivi_k:b=4,group=16", 80, 48, 4, true, 16);
  expect_within_half_step("kivi_v:b=2,group=32", 128, 40, 2, false, 32);
  expect_within_half_step("kivi_v:b=4,group=32", 100, 40, 4, false, 32);  // a partial last channel group
}

TEST(GroupQuantizer, Q4_0MatchesTheFormula) {
  const size_t dim = 64;
  auto x = testutil::gaussian_matrix(5, dim, 3);
  auto codec = make_codec("q4_0", dim);
  auto codes = codec->make_buffer();
  codec->encode(x.data(), 5, codes);
  std::vector<float> decoded(5 * dim);
  codec->decode(codes, 0, 5, decoded.data());
  for (size_t i = 0; i < 5; ++i)
    for (size_t g = 0; g < dim / 32; ++g) {
      float extreme = 0.0f;
      for (size_t c = g * 32; c < g * 32 + 32; ++c)
        if (std::abs(x[i * dim + c]) > std::abs(extreme)) extreme = x[i * dim + c];
      const float scale = half_to_float(float_to_half(extreme / -8.0f));
      for (size_t c = g * 32; c < g * 32 + 32; ++c) {
        const float level = std::clamp(std::nearbyint(x[i * dim + c] / scale) + 8.0f, 0.0f, 15.0f);
        ASSERT_EQ(decoded[i * dim + c], scale * (level - 8.0f)) << "row " << i << " channel " << c;
      }
    }
}

TEST(GroupQuantizer, Q8_0MatchesTheFormula) {
  const size_t dim = 96;
  auto x = testutil::gaussian_matrix(5, dim, 4);
  auto codec = make_codec("q8_0", dim);
  auto codes = codec->make_buffer();
  codec->encode(x.data(), 5, codes);
  std::vector<float> decoded(5 * dim);
  codec->decode(codes, 0, 5, decoded.data());
  for (size_t i = 0; i < 5; ++i)
    for (size_t g = 0; g < dim / 32; ++g) {
      float magnitude = 0.0f;
      for (size_t c = g * 32; c < g * 32 + 32; ++c) magnitude = std::max(magnitude, std::abs(x[i * dim + c]));
      const float scale = half_to_float(float_to_half(magnitude / 127.0f));
      for (size_t c = g * 32; c < g * 32 + 32; ++c) {
        const float q = std::clamp(std::nearbyint(x[i * dim + c] / scale), -127.0f, 127.0f);
        ASSERT_EQ(decoded[i * dim + c], scale * q) << "row " << i << " channel " << c;
      }
    }
}

// rotate:q4_0 (llama.cpp's rotated caches): a loud channel no longer sets its group's scale, so the
// other channels keep their resolution (2.4 times less squared error here); it costs no bytes.
TEST(GroupQuantizer, RotationHelpsQ4_0WithAnOutlierChannel) {
  const size_t dim = 128, rows = 200;
  auto x = testutil::gaussian_matrix(rows, dim, 11);
  for (size_t i = 0; i < rows; ++i) x[i * dim + 7] *= 30.0f;
  double error[2] = {0, 0};
  for (int rotated = 0; rotated < 2; ++rotated) {
    auto codec = make_codec(rotated ? "rotate:q4_0" : "q4_0", dim, 3);
    auto codes = codec->make_buffer();
    codec->encode(x.data(), rows, codes);
    std::vector<float> decoded(rows * dim);
    codec->decode(codes, 0, rows, decoded.data());
    for (size_t i = 0; i < x.size(); ++i) error[rotated] += (decoded[i] - x[i]) * (decoded[i] - x[i]);
  }
  EXPECT_LT(error[1], error[0] / 2) << "q4_0 " << error[0] << ", rotate:q4_0 " << error[1];
  EXPECT_EQ(make_codec("rotate:q4_0", dim)->code_bytes(), make_codec("q4_0", dim)->code_bytes());
  EXPECT_NE(testutil::error_of([] { make_codec("rotate:rotate:q4_0", 64); }).find("'rotate:' is given twice"),
            std::string::npos);
}

TEST(GroupQuantizer, BytesAreExact) {
  // KIVI keys at d=128, G=32: 2-bit values (32 bytes) + a 1/32 share of 128 fp16 minima and steps (16 bytes).
  EXPECT_EQ(make_codec("kivi_k:b=2,group=32", 128)->code_bytes(), 32u + 16);
  EXPECT_EQ(make_codec("kivi_v:b=2,group=32", 128)->code_bytes(), 32u + 4 * 4);
  EXPECT_EQ(make_codec("kivi_v:b=4,group=32", 128)->code_bytes(), 64u + 4 * 4);
  EXPECT_EQ(make_codec("q4_0", 128)->code_bytes(), 64u + 4 * 2);  // 4.5 bits per value, as ggml's
  EXPECT_EQ(make_codec("q4_0", 100)->code_bytes(), 50u + 4 * 2);
  EXPECT_EQ(make_codec("q8_0", 128)->code_bytes(), 128u + 4 * 2);  // 8.5 bits per value, as ggml's
}

TEST(GroupQuantizer, KeyGroupsAreEnforced) {
  auto codec = make_codec("kivi_k:b=2,group=32", 64);
  EXPECT_EQ(codec->row_group(), 32u);
  auto x = testutil::gaussian_matrix(70, 64, 1);
  auto codes = codec->make_buffer();
  EXPECT_THROW(codec->encode(x.data(), 70, codes), Error);
  EXPECT_EQ(codes.size(), 0u);
  codec->encode(x.data(), 64, codes);
  std::vector<float> out(64);
  auto q = codec->prepare(x.data());
  EXPECT_THROW(codec->scores(*q, codes, 3, 10, out.data()), Error);
  codec->scores(*q, codes, 32, 32, out.data());
  // Multi-query forms agree with the one-query forms over whole groups.
  const PreparedQuery* both[2] = {q.get(), q.get()};
  std::vector<float> multi(2 * 64);
  codec_base(*codec).scores_multi(both, 2, codes, 0, 64, multi.data(), 64);
  std::vector<float> one(64);
  codec->scores(*q, codes, 0, 64, one.data());
  for (size_t i = 0; i < 64; ++i) {
    EXPECT_NEAR(multi[i], one[i], 1e-4f * (1.0f + std::abs(one[i])));
    EXPECT_NEAR(multi[64 + i], one[i], 1e-4f * (1.0f + std::abs(one[i])));
  }
}

TEST(GroupQuantizer, BadSpecsAreRefused) {
  EXPECT_THROW(make_codec("kivi_k", 64), Error);            // b required
  EXPECT_THROW(make_codec("kivi_v:b=9", 64), Error);
  EXPECT_THROW(make_codec("kivi_k:b=2,group=0", 64), Error);
  EXPECT_THROW(make_codec("q4_0:b=3", 64), Error);
}
