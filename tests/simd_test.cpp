// Every dispatched kernel against its scalar reference, on every instruction set compiled in and
// supported here. Encode-path kernels must agree bit for bit (same codes on every machine).
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include "kvsketch/bitpack.hpp"
#include "kvsketch/codebook.hpp"
#include "kvsketch/half.hpp"
#include "simd/affine_kernels.hpp"
#include "simd/attention_kernels.hpp"
#include "simd/fast_scan_kernels.hpp"
#include "simd/kernels.hpp"
#include "simd/quantizer_grid.hpp"
#include "simd/table_sums.hpp"
#include "test_util.hpp"

using namespace kvsketch;

using testutil::for_each_target;

TEST(Simd, FwhtBitExact) {
  for_each_target([] {
    // Every split of the stages into register sweeps: 1 to 12 stages.
    for (size_t n = 1; n <= 4096; n *= 2) {
      auto data = testutil::gaussian_matrix(1, n, n);
      auto expected = data;
      simd::reference::fwht(expected.data(), n);
      simd::fwht(data.data(), n);
      EXPECT_EQ(data, expected) << "n=" << n;
      const auto factors = testutil::gaussian_matrix(1, n, n + 1);
      auto fused = testutil::gaussian_matrix(1, n, n + 2);
      expected = fused;
      simd::reference::multiply(expected.data(), factors.data(), n);
      simd::reference::fwht(expected.data(), n);
      simd::multiply_fwht(fused.data(), factors.data(), n);
      EXPECT_EQ(fused, expected) << "fused, n=" << n;
      // Out of place, scaled on the way: (x * scale) * factor, then the transform.
      const auto input = testutil::gaussian_matrix(1, n, n + 3);
      std::vector<float> scaled(n), reference_scaled(n);
      simd::scaled_multiply_fwht(input.data(), 0.61f, factors.data(), scaled.data(), n);
      simd::reference::scaled_multiply_fwht(input.data(), 0.61f, factors.data(), reference_scaled.data(), n);
      EXPECT_EQ(scaled, reference_scaled) << "scaled, n=" << n;
      for (size_t i = 0; i < n; ++i) expected[i] = input[i] * 0.61f * factors[i];
      simd::reference::fwht(expected.data(), n);
      EXPECT_EQ(reference_scaled, expected) << "scaled reference, n=" << n;
    }
  });
}

TEST(Simd, ElementwiseAndReductionsBitExact) {
  for_each_target([] {
    for (size_t n : {1, 5, 16, 17, 63, 65, 100, 128, 784, 1000, 1536}) {
      auto x = testutil::gaussian_matrix(1, n, 1);
      auto f = testutil::gaussian_matrix(1, n, 2);
      auto a = x, b = x;
      simd::multiply(a.data(), f.data(), n);
      simd::reference::multiply(b.data(), f.data(), n);
      EXPECT_EQ(a, b);
      simd::scale(a.data(), 0.37f, n);
      simd::reference::scale(b.data(), 0.37f, n);
      EXPECT_EQ(a, b);
      EXPECT_EQ(simd::sum_of_squares(x.data(), n), simd::reference::sum_of_squares(x.data(), n)) << n;
      EXPECT_EQ(simd::fixed_order_dot(x.data(), f.data(), n), simd::reference::fixed_order_dot(x.data(), f.data(), n))
          << n;
      EXPECT_EQ(simd::fixed_order_sum(x.data(), n), simd::reference::fixed_order_sum(x.data(), n)) << n;
      double sum = 0.0, magnitude = 0.0;
      for (float v : x) sum += v, magnitude += std::fabs(v);
      EXPECT_NEAR(simd::reference::fixed_order_sum(x.data(), n), sum, 1e-6 * magnitude + 1e-30) << n;
    }
  });
}

TEST(Simd, SubtractTableBitExact) {
  for_each_target([] {
    for (size_t table_size : {2, 4, 8, 16, 17, 256}) {
      const size_t n = 1000;
      auto values = testutil::gaussian_matrix(1, n, 5);
      auto table = testutil::gaussian_matrix(1, table_size, 6);
      std::vector<uint8_t> indices(n);
      for (size_t i = 0; i < n; ++i) indices[i] = static_cast<uint8_t>((i * 7919) % table_size);
      std::vector<float> got(n), expected(n);
      simd::subtract_table(values.data(), indices.data(), n, table.data(), table_size, got.data());
      simd::reference::subtract_table(values.data(), indices.data(), n, table.data(), table_size, expected.data());
      EXPECT_EQ(got, expected) << "table_size=" << table_size;
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(expected[i], values[i] - table[indices[i]]);
    }
  });
}

TEST(Simd, CodewordDotBitExact) {
  for_each_target([] {
    for (size_t table_size : {2, 4, 8, 16, 17}) {
      for (size_t n : {1, 63, 64, 1000, 1536}) {
        auto values = testutil::gaussian_matrix(1, n, 7);
        auto table = testutil::gaussian_matrix(1, table_size, 8);
        std::vector<uint8_t> indices(n);
        for (size_t i = 0; i < n; ++i) indices[i] = static_cast<uint8_t>((i * 7919) % table_size);
        std::vector<float> residual(n);
        simd::reference::subtract_table(values.data(), indices.data(), n, table.data(), table_size, residual.data());
        const float expected = simd::reference::sum_of_squares(values.data(), n) -
                               simd::reference::fixed_order_dot(values.data(), residual.data(), n);
        EXPECT_EQ(simd::codeword_dot(values.data(), indices.data(), n, table.data(), table_size), expected)
            << "table_size=" << table_size << " n=" << n;
        double exact = 0.0;
        for (size_t i = 0; i < n; ++i) exact += static_cast<double>(values[i]) * table[indices[i]];
        EXPECT_NEAR(expected, exact, 1e-4 * n);
      }
    }
  });
}

TEST(Simd, SubtractSumOfSquaresIsTheTwoSteps) {
  for_each_target([] {
    for (size_t n : {1, 63, 64, 100, 1536}) {
      const auto in = testutil::gaussian_matrix(1, n, 21);
      const auto centre = testutil::gaussian_matrix(1, n, 22, 0.1);
      for (const float* c : {centre.data(), static_cast<const float*>(nullptr)}) {
        std::vector<float> expected(n), out(n);
        for (size_t i = 0; i < n; ++i) expected[i] = c ? in[i] - c[i] : in[i];
        const float squares = simd::subtract_sum_of_squares(in.data(), c, out.data(), n);
        EXPECT_EQ(out, expected) << "n=" << n;
        EXPECT_EQ(squares, simd::reference::sum_of_squares(expected.data(), n)) << "n=" << n;
        std::vector<float> in_place = in;  // out may be in
        EXPECT_EQ(simd::subtract_sum_of_squares(in_place.data(), c, in_place.data(), n), squares);
        EXPECT_EQ(in_place, expected);
      }
    }
  });
}

TEST(Simd, QuantizePackDotIsTheThreeKernels) {
  for_each_target([] {
    for (int bits = 1; bits <= 4; ++bits)
      for (size_t n : {2, 16, 64, 80, 1000, 1536, 1537}) {
        SCOPED_TRACE(testing::Message() << "bits " << bits << " n " << n);
        const auto& book = lloyd_max_codebook(CoordinateLaw::kBeta, 1536, bits);
        const simd::QuantizerGrid grid = simd::make_quantizer_grid(book.boundaries.data(), bits);
        auto values = testutil::gaussian_matrix(1, n, 11 + bits, 1.0 / std::sqrt(1536.0));
        values[n / 2] = 10.0f;  // clamped to the last cell
        values[0] = book.boundaries[book.boundaries.size() / 2];  // a tie goes to the lower index
        std::vector<uint8_t> indices(n), expected_packed(packed_bytes(n, bits)), packed(expected_packed.size(), 0xAA),
            scratch(n);
        simd::reference::quantize(values.data(), n, book.boundaries.data(), bits, indices.data());
        pack_bits(indices.data(), n, bits, expected_packed.data());
        const float expected = simd::reference::codeword_dot(values.data(), indices.data(), n, book.centroids.data(),
                                                             book.centroids.size());
        const float got = simd::quantize_pack_dot(values.data(), n, book.boundaries.data(), bits, &grid,
                                                  book.centroids.data(), book.centroids.size(), packed.data(),
                                                  scratch.data());
        EXPECT_EQ(packed, expected_packed);
        EXPECT_EQ(got, expected);
      }
  });
}

TEST(Simd, QuantizeBitExact) {
  for_each_target([] {
    for (int bits = 1; bits <= 8; ++bits) {
      const auto& book = lloyd_max_codebook(CoordinateLaw::kBeta, 128, bits);
      auto values = testutil::gaussian_matrix(1, 1000, bits, 1.0 / std::sqrt(128.0));
      values[3] = book.boundaries[0];  // ties go to the lower index
      std::vector<uint8_t> a(1000), b(1000);
      simd::quantize(values.data(), 1000, book.boundaries.data(), bits, a.data());
      simd::reference::quantize(values.data(), 1000, book.boundaries.data(), bits, b.data());
      EXPECT_EQ(a, b) << "bits=" << bits;
      EXPECT_EQ(a[3], 0);
    }
  });
}

TEST(Simd, QuantizeGridIsTheSameCountOnEveryTarget) {
  for_each_target([] {
    for (const CoordinateLaw law : {CoordinateLaw::kBeta, CoordinateLaw::kGaussian})
      for (const size_t dim : {size_t{64}, size_t{128}, size_t{1536}})
        for (int bits = 3; bits <= 4; ++bits) {
          SCOPED_TRACE(testing::Message() << "dim " << dim << " bits " << bits);
          const auto& book = lloyd_max_codebook(law, dim, bits);
          const simd::QuantizerGrid grid = simd::make_quantizer_grid(book.boundaries.data(), bits);
          ASSERT_TRUE(grid.usable);  // the encoders' fast path serves every width it is built for
          EXPECT_LE(grid.per_cell, simd::QuantizerGrid::kMaxPerCell);
          auto values = testutil::gaussian_matrix(1, 997, 3 + bits, 1.0 / std::sqrt(static_cast<double>(dim)));
          // Every boundary, its float neighbours, zeros and far outliers (the clamped cells).
          for (const float b : book.boundaries)
            for (const float v : {b, std::nextafter(b, -1e30f), std::nextafter(b, 1e30f)}) values.push_back(v);
          for (const float v : {0.0f, -0.0f, 10.0f, -10.0f, 1e30f, -1e30f}) values.push_back(v);
          std::vector<uint8_t> fast(values.size()), slow(values.size());
          simd::quantize(values.data(), values.size(), book.boundaries.data(), bits, fast.data(), &grid);
          simd::reference::quantize(values.data(), values.size(), book.boundaries.data(), bits, slow.data());
          EXPECT_EQ(fast, slow);
        }
  });
  // Too few boundaries for a grid: the caller keeps the direct count.
  EXPECT_FALSE(simd::make_quantizer_grid(lloyd_max_codebook(CoordinateLaw::kBeta, 128, 2).boundaries.data(), 2).usable);
}

TEST(Simd, MatvecBitExact) {
  for_each_target([] {
    for (size_t rows : {1, 7, 64, 130}) {
      const size_t cols = 96;
      auto m = testutil::gaussian_matrix(rows, cols, 4);
      auto x = testutil::gaussian_matrix(1, cols, 5);
      std::vector<float> a(rows), b(rows);
      simd::matvec_columns(m.data(), rows, cols, x.data(), a.data());
      simd::reference::matvec_columns(m.data(), rows, cols, x.data(), b.data());
      EXPECT_EQ(a, b) << rows;
    }
  });
}

TEST(Simd, SignBitsBitExact) {
  for_each_target([] {
    for (size_t n : {1, 8, 13, 64, 128, 200}) {
      auto x = testutil::gaussian_matrix(1, n, 9);
      x[0] = 0.0f;  // zero counts as negative
      std::vector<uint8_t> a((n + 7) / 8, 0xFF), b((n + 7) / 8, 0xFF);
      simd::sign_bits(x.data(), n, a.data());
      simd::reference::sign_bits(x.data(), n, b.data());
      EXPECT_EQ(a, b) << n;
      EXPECT_EQ(a[0] & 1, 0);
    }
  });
}

// The KIVI and q4_0 decode: per-coordinate and per-group minima and steps, groups that do and do
// not fill whole vectors, tails; the scalar expression's bits on every target.
TEST(Simd, AffineDecodeBitExact) {
  for_each_target([] {
    for (size_t n : {7, 64, 100, 128}) {
      std::vector<uint8_t> levels(n);
      for (size_t c = 0; c < n; ++c) levels[c] = static_cast<uint8_t>((c * 37 + 11) % 16);
      const auto low = testutil::gaussian_matrix(1, n, n + 1), step = testutil::gaussian_matrix(1, n, n + 2);
      for (size_t group : {1, 5, 32}) {
        for (int offset : {0, 8}) {
          std::vector<float> got(n), expected(n);
          simd::affine_decode(levels.data(), n, low.data(), step.data(), group, offset, got.data());
          for (size_t c = 0; c < n; ++c)
            expected[c] = low[c / group] + step[c / group] * static_cast<float>(static_cast<int>(levels[c]) - offset);
          EXPECT_EQ(got, expected) << "n=" << n << " group=" << group << " offset=" << offset;
        }
      }
    }
  });
}

TEST(Simd, DotAndAxpyMatchReference) {
  for_each_target([] {
    for (size_t n : {3, 64, 1000}) {
      auto a = testutil::gaussian_matrix(1, n, 6);
      auto b = testutil::gaussian_matrix(1, n, 7);
      EXPECT_NEAR(simd::dot(a.data(), b.data(), n), simd::reference::dot(a.data(), b.data(), n), 1e-5 * n);
      auto c = b, d = b;
      simd::axpy(0.5f, a.data(), c.data(), n);
      simd::reference::axpy(0.5f, a.data(), d.data(), n);
      for (size_t i = 0; i < n; ++i) EXPECT_NEAR(c[i], d[i], 1e-6);
    }
  });
}

TEST(Simd, ByteTablesMatchDirectSums) {
  const size_t dim = 100;
  auto query = testutil::gaussian_matrix(1, dim, 8);
  const auto& book = lloyd_max_codebook(CoordinateLaw::kBeta, dim, 2);
  std::vector<float> tables(25 * 256);
  simd::build_value_byte_tables(query.data(), dim, book.centroids.data(), 2, tables.data());
  std::vector<uint8_t> code(25);
  for (size_t p = 0; p < 25; ++p) code[p] = static_cast<uint8_t>(p * 37 + 11);
  float out;
  simd::byte_table_sums(tables.data(), 25, code.data(), 25, 1, &out);
  double expected = 0;
  for (size_t j = 0; j < dim; ++j) expected += query[j] * book.centroids[(code[j / 4] >> (2 * (j % 4))) & 3];
  EXPECT_NEAR(out, expected, 1e-5);

  std::vector<float> sign_tables(13 * 256);
  simd::build_sign_byte_tables(query.data(), dim, sign_tables.data());
  std::vector<uint8_t> signs(13);
  for (size_t p = 0; p < 13; ++p) signs[p] = static_cast<uint8_t>(p * 91 + 5);
  simd::byte_table_sums(sign_tables.data(), 13, signs.data(), 13, 1, &out);
  expected = 0;
  for (size_t t = 0; t < dim; ++t) expected += ((signs[t / 8] >> (t % 8)) & 1) ? query[t] : -query[t];
  EXPECT_NEAR(out, expected, 1e-5);
}

TEST(Simd, FastScanPackBlockOnEveryTarget) {
  for_each_target([] {
    for (size_t code_bytes : {1, 15, 16, 17, 64, 770}) {
      std::vector<uint8_t> codes(32 * code_bytes);
      for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
      const uint8_t* rows[32];
      for (size_t j = 0; j < 32; ++j) rows[j] = codes.data() + j * code_bytes;
      std::vector<uint8_t> got(2 * code_bytes * 16), expected(got.size());
      simd::fast_scan_pack_block(rows, code_bytes, got.data());
      simd::reference::fast_scan_pack_block(rows, code_bytes, expected.data());
      EXPECT_EQ(got, expected) << "code_bytes=" << code_bytes;
      // The definition: nibble g of row r sits in byte r % 16 of group g, low half for r < 16.
      for (size_t r = 0; r < 32; ++r)
        for (size_t g = 0; g < 2 * code_bytes; ++g) {
          const uint8_t byte = expected[g * 16 + r % 16];
          const uint8_t nibble = r < 16 ? byte & 15 : byte >> 4;
          ASSERT_EQ(nibble, (rows[r][g / 2] >> (4 * (g % 2))) & 15) << r << " " << g;
        }
    }
  });
}

TEST(Simd, FastScanSumsExactOnEveryTarget) {
  for_each_target([] {
    // 3 blocks, up to 1100 groups: more than one flush of the u16 sums on every target.
    for (const size_t groups : {size_t{4}, size_t{64}, size_t{1100}}) {
      std::vector<uint8_t> codes(3 * groups * 16), tables(groups * 16);
      uint64_t state = 12345;
      auto next = [&] {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        return static_cast<uint8_t>(state >> 56);
      };
      for (auto& c : codes) c = next();
      for (auto& t : tables) t = next();
      std::vector<uint32_t> fast(96), slow(96);
      simd::fast_scan_sums(codes.data(), groups, 3, tables.data(), fast.data());
      simd::reference::fast_scan_sums(codes.data(), groups, 3, tables.data(), slow.data());
      EXPECT_EQ(fast, slow) << groups << " groups";
    }
  });
}

// The softmax's maximum: every length up to past four chains of vectors and a tail, with the
// largest value at every position (each chain, the single vectors after them, the scalar tail).
TEST(Simd, MaxValueFindsTheLargestAnywhereOnEveryTarget) {
  for_each_target([&] {
    for (size_t n = 1; n <= 150; n += 7) {
      std::vector<float> x(n);
      for (size_t i = 0; i < n; ++i) x[i] = -1000.0f + static_cast<float>((i * 37) % 101);
      for (size_t at = 0; at < n; ++at) {
        std::vector<float> y = x;
        y[at] = 5.0f + static_cast<float>(at);
        ASSERT_EQ(simd::max_value(y.data(), n), y[at]) << "n " << n << " largest at " << at;
      }
    }
  });
}

// The cache's input check: the largest magnitude's bits wherever it is (both chains, the scalar
// tail), of either sign, and NaN and infinities above every finite value, on every target.
TEST(Simd, LargestMagnitudeBitsOnEveryTarget) {
  const auto bits_of = [](float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    return bits & 0x7FFFFFFFu;
  };
  for_each_target([&] {
    EXPECT_EQ(simd::largest_magnitude_bits(nullptr, 0), 0u);
    for (size_t n = 1; n <= 75; n += 3) {
      std::vector<float> x(n);
      for (size_t i = 0; i < n; ++i) x[i] = (i % 2 ? -1.0f : 1.0f) * static_cast<float>((i * 37) % 101);
      for (size_t at = 0; at < n; ++at)
        for (const float special : {-65504.5f, 65504.0f, std::numeric_limits<float>::infinity(),
                                    -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
          std::vector<float> y = x;
          y[at] = special;
          const uint32_t got = simd::largest_magnitude_bits(y.data(), n);
          if (std::isnan(special)) {
            ASSERT_GT(got, 0x7F800000u) << "n " << n << " NaN at " << at;
          } else {
            ASSERT_EQ(got, bits_of(special)) << "n " << n << " " << special << " at " << at;
          }
        }
    }
  });
}

// The outlier split's channel gather: any order, whole vectors and a tail.
TEST(Simd, GatherFloatsOnEveryTarget) {
  for_each_target([] {
    std::vector<float> x(300);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f - 7.0f;
    for (size_t n : {0, 1, 7, 8, 16, 33, 96}) {
      std::vector<uint32_t> indices(n);
      for (size_t k = 0; k < n; ++k) indices[k] = static_cast<uint32_t>((k * 37 + 5) % x.size());
      std::vector<float> out(n + 1, -1.0f);
      simd::gather_floats(x.data(), indices.data(), n, out.data());
      for (size_t k = 0; k < n; ++k) ASSERT_EQ(out[k], x[indices[k]]) << n << " " << k;
      EXPECT_EQ(out[n], -1.0f) << n;  // nothing past n
    }
  });
}

// The two passes of nearest_centroids' screen against their scalar definitions: the l2 form in
// place, lower bounds and their largest, and the indices whose upper bound reaches a threshold, in
// order, over lengths with and without a tail.
TEST(Simd, ScreenPassesOnEveryTarget) {
  for_each_target([] {
    for (size_t n : {1, 7, 16, 33, 100}) {
      std::vector<float> dots(n), squared(n), norms(n);
      for (size_t c = 0; c < n; ++c) {
        dots[c] = static_cast<float>((c * 37) % 23) * 0.25f - 2.0f;
        squared[c] = static_cast<float>((c * 11) % 7) * 0.5f;
        norms[c] = static_cast<float>(c % 5) + 0.5f;
      }
      for (const bool l2 : {true, false}) {
        const float base = 0.125f, slope = 0.25f;  // exact in float: fused or not, the same margins
        std::vector<float> s = dots, lower(n);
        const float largest =
            simd::screen_lower_bounds(s.data(), l2 ? squared.data() : nullptr, norms.data(), base, slope, n, lower.data());
        float expected_largest = -INFINITY;
        for (size_t c = 0; c < n; ++c) {
          const float similarity = l2 ? 2.0f * dots[c] - squared[c] : dots[c];
          ASSERT_EQ(s[c], similarity) << n << " " << c;
          ASSERT_EQ(lower[c], similarity - (base + slope * norms[c])) << n << " " << c;
          expected_largest = std::max(expected_largest, lower[c]);
        }
        EXPECT_EQ(largest, expected_largest) << n;
        const float threshold = expected_largest - 1.0f;
        std::vector<uint32_t> chosen(n, 9999), expected;
        for (size_t c = 0; c < n; ++c)
          if (s[c] + (base + slope * norms[c]) >= threshold) expected.push_back(static_cast<uint32_t>(c));
        const size_t count = simd::screen_select(s.data(), norms.data(), base, slope, threshold, n, chosen.data());
        ASSERT_EQ(count, expected.size()) << n;
        EXPECT_TRUE(std::equal(expected.begin(), expected.end(), chosen.begin())) << n;
      }
    }
  });
}

// The bandwidth probe's pass: the sum, whatever the length (whole groups of lines, a tail).
TEST(Simd, StreamedSumOnEveryTarget) {
  for_each_target([] {
    EXPECT_EQ(simd::streamed_sum(nullptr, 0), 0.0f);
    for (size_t n : {1, 15, 16, 63, 64, 65, 200, 4099}) {
      std::vector<float> x(n);
      double expected = 0.0;
      for (size_t i = 0; i < n; ++i) expected += x[i] = static_cast<float>((i * 37) % 101) - 50.0f;
      ASSERT_NEAR(simd::streamed_sum(x.data(), n), expected, 1e-3 * (1.0 + std::fabs(expected))) << n;
    }
  });
}

// The fp16 rows of the cache (sinks and window) convert as float_to_half does, rounding to nearest
// even, on every target: F16C where the target has it, the scalar conversion where Highway would
// emulate it (by truncating). Half to float is exact everywhere for finite halves.
TEST(Simd, HalfRowsConvertAsTheScalarConversionOnEveryTarget) {
  std::vector<float> values;
  std::mt19937 rng(11);
  for (uint32_t exponent = 100; exponent < 143; ++exponent)  // 2^-27 (flushed to zero) up to 2^15
    for (int k = 0; k < 200; ++k) {
      const uint32_t bits = (rng() & 0x80000000u) | (exponent << 23) | (rng() & 0x7FFFFFu);
      values.push_back(std::bit_cast<float>(bits));
    }
  for (uint32_t exponent = 103; exponent < 143; ++exponent)  // ties: exactly half a half's last place
    for (uint32_t mantissa = 0; mantissa < 8; ++mantissa) {
      const float tie = std::bit_cast<float>((exponent << 23) | (mantissa << 13) | 0x1000u);
      values.push_back(tie);
      values.push_back(-tie);
    }
  for (float v : {0.0f, -0.0f, 65504.0f, -65504.0f, 65519.0f, 65520.0f, 6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f})
    values.push_back(v);
  std::vector<uint16_t> expected(values.size());
  for (size_t i = 0; i < values.size(); ++i) expected[i] = float_to_half(values[i]);
  std::vector<uint16_t> finite_halves;
  for (uint32_t h = 0; h < 65536; ++h)
    if (half_is_finite(static_cast<uint16_t>(h))) finite_halves.push_back(static_cast<uint16_t>(h));
  for_each_target([&] {
    std::vector<uint16_t> halves(values.size());
    simd::float_to_half_row(values.data(), values.size(), halves.data());
    size_t differ = 0;
    for (size_t i = 0; i < values.size(); ++i) differ += halves[i] != expected[i];
    EXPECT_EQ(differ, 0u) << "of " << values.size();
    std::vector<float> floats(finite_halves.size());
    simd::half_to_float_row(finite_halves.data(), finite_halves.size(), floats.data());
    for (size_t i = 0; i < finite_halves.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(floats[i]), std::bit_cast<uint32_t>(half_to_float(finite_halves[i])))
          << std::hex << finite_halves[i];
  });
}

// Softmax weights: within 2 float ulps of exp (the Taylor polynomial's bound is 1.3e-7), exactly
// 1 at the maximum, 0 below e^-86, and the same bits on every target with FMA (the tail included).
TEST(Simd, ExpShiftedSumAccurateAndSameOnEveryTarget) {
  std::vector<float> logits;
  for (int i = 0; i <= 20000; ++i) logits.push_back(-90.0f + 90.0f * static_cast<float>(i) / 20000.0f);
  logits.push_back(3.0f);  // the maximum; 20,002 values leave a partial last vector on every target
  const float shift = 3.0f;
  std::vector<float> first;
  float first_sum = 0.0f;
  for_each_target([&] {
    std::vector<float> x = logits;
    const float sum = simd::exp_shifted_sum(x.data(), x.size(), shift);
    double exact_sum = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double exact = std::exp(static_cast<double>(logits[i] - shift));  // of the float difference
      if (logits[i] - shift < -86.0f) {
        EXPECT_EQ(x[i], 0.0f) << logits[i];
        continue;
      }
      exact_sum += exact;
      EXPECT_NEAR(x[i], exact, 2.5e-7 * exact) << logits[i];
    }
    EXPECT_EQ(x.back(), 1.0f);
    EXPECT_NEAR(sum, exact_sum, 1e-6 * exact_sum);
    // Without FMA the polynomial rounds differently: x86 before AVX2, and the emulated targets.
#if HWY_ARCH_X86
    if (hwy::SupportedTargets() > HWY_AVX2) return;
#else
    if (hwy::SupportedTargets() & (HWY_EMU128 | HWY_SCALAR)) return;
#endif
    if (first.empty()) {
      first = x;
      first_sum = sum;
    }
    EXPECT_EQ(x, first);
  });
#ifndef KVSKETCH_PORTABLE  // the portable build has no FMA target to compare
  EXPECT_GT(first_sum, 1.0f);
#endif
}
