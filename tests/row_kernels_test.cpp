// The two row kernels of decode attention (simd/row_kernels.hpp) against a double-precision
// reference, for every stored format, on every target: row counts that are not whole groups of
// four, one to nine heads (groups of eight and four, and the rest), and dimensions with columns past
// the last whole vector.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kvsketch/bitpack.hpp"
#include "kvsketch/half.hpp"
#include "kvsketch/random.hpp"
#include "simd/row_kernels.hpp"
#include "test_util.hpp"

using namespace kvsketch;

namespace {

// Rows of one format with their values as floats (what the kernels must read).
struct StoredRows {
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // n x dim
  std::vector<float> table;
  simd::RowSource source;
};

StoredRows make_rows(simd::RowFormat format, int bits, size_t n, size_t dim, uint64_t seed) {
  RandomStream stream(seed);
  StoredRows rows;
  rows.values.resize(n * dim);
  size_t stride = 0;
  switch (format) {
    case simd::RowFormat::kFloat: stride = 4 * dim; break;
    case simd::RowFormat::kHalf: stride = 2 * dim; break;
    case simd::RowFormat::kInt8: stride = dim; break;
    case simd::RowFormat::kUint8: stride = dim; break;
    case simd::RowFormat::kIndex: stride = packed_bytes(dim, bits); break;
    case simd::RowFormat::kSign: stride = (dim + 7) / 8; break;
  }
  rows.bytes.assign(n * stride, 0);
  for (int k = 0; k < (1 << bits); ++k) rows.table.push_back(static_cast<float>(stream.gaussian()));
  std::vector<uint8_t> indices(dim);
  for (size_t i = 0; i < n; ++i) {
    uint8_t* row = rows.bytes.data() + i * stride;
    float* value = rows.values.data() + i * dim;
    for (size_t j = 0; j < dim; ++j) {
      const float g = static_cast<float>(stream.gaussian());
      switch (format) {
        case simd::RowFormat::kFloat: std::memcpy(row + 4 * j, &g, 4); value[j] = g; break;
        case simd::RowFormat::kHalf: {
          const uint16_t h = float_to_half(g);
          std::memcpy(row + 2 * j, &h, 2);
          value[j] = half_to_float(h);
          break;
        }
        case simd::RowFormat::kInt8: {
          const auto q = static_cast<int8_t>(std::lround(std::clamp(g * 40.0f, -127.0f, 127.0f)));
          row[j] = static_cast<uint8_t>(q);
          value[j] = q;
          break;
        }
        case simd::RowFormat::kUint8:
          row[j] = static_cast<uint8_t>(stream.next_u64() % 256);
          value[j] = row[j];
          break;
        case simd::RowFormat::kIndex:
          indices[j] = static_cast<uint8_t>(stream.next_u64() % (1u << bits));
          value[j] = rows.table[indices[j]];
          break;
        case simd::RowFormat::kSign:
          if (g > 0) row[j / 8] |= static_cast<uint8_t>(1u << (j % 8));
          value[j] = g > 0 ? 1.0f : -1.0f;
          break;
      }
    }
    if (format == simd::RowFormat::kIndex) pack_bits(indices.data(), dim, bits, row);
  }
  rows.source = {format, rows.bytes.data(), stride, dim, bits, format == simd::RowFormat::kIndex ? rows.table.data() : nullptr};
  return rows;
}

struct Case {
  simd::RowFormat format;
  int bits;
};

}  // namespace

TEST(RowKernels, ScoresAndWeightedSumsMatchTheReferenceOnEveryTarget) {
  const std::vector<Case> cases = {{simd::RowFormat::kFloat, 0}, {simd::RowFormat::kHalf, 0},
                                   {simd::RowFormat::kInt8, 0},  {simd::RowFormat::kUint8, 0},
                                   {simd::RowFormat::kSign, 0},
                                   {simd::RowFormat::kIndex, 1}, {simd::RowFormat::kIndex, 2},
                                   {simd::RowFormat::kIndex, 3}, {simd::RowFormat::kIndex, 4},
                                   // 5-8: tables past two vectors, looked up by gathers
                                   {simd::RowFormat::kIndex, 5}, {simd::RowFormat::kIndex, 6},
                                   {simd::RowFormat::kIndex, 7}, {simd::RowFormat::kIndex, 8}};
  testutil::for_each_target([&] {
    for (const Case& c : cases)
      // 8, 20 and 100: a partial last vector on every target, which index rows load whole (the
      // query zero past dim) within their exactly sized buffer: the last row from its padded copy.
      for (size_t dim : {8, 20, 80, 100, 128})
        for (size_t n : {1, 3, 4, 7, 70})
          for (size_t heads : {1, 2, 3, 4, 6, 8, 9}) {  // 8 and 9: the eight-head tiles of AVX-512
            SCOPED_TRACE(testing::Message() << "format " << static_cast<int>(c.format) << " bits " << c.bits << " dim "
                                            << dim << " n " << n << " heads " << heads);
            const StoredRows rows = make_rows(c.format, c.bits, n, dim, 100 + dim + n);
            RandomStream stream(7 + heads);
            std::vector<float> queries(heads * dim), weights(heads * n);
            for (auto& q : queries) q = static_cast<float>(stream.gaussian());
            for (auto& w : weights) w = static_cast<float>(stream.uniform());
            const float scale = 0.25f;
            std::vector<float> scores(heads * n, -1.0f), acc(heads * dim, 0.5f);
            simd::row_scores(rows.source, n, queries.data(), heads, scale, scores.data(), n);
            simd::row_weighted_sum(rows.source, n, weights.data(), heads, n, acc.data(), dim);
            for (size_t h = 0; h < heads; ++h) {
              for (size_t i = 0; i < n; ++i) {
                const double exact =
                    scale * testutil::dot(queries.data() + h * dim, rows.values.data() + i * dim, dim);
                ASSERT_NEAR(scores[h * n + i], exact, 1e-5 * (1.0 + std::abs(exact)) * std::sqrt(dim)) << h << " " << i;
              }
              for (size_t j = 0; j < dim; ++j) {
                double exact = 0.5;
                for (size_t i = 0; i < n; ++i) exact += static_cast<double>(weights[h * n + i]) * rows.values[i * dim + j];
                ASSERT_NEAR(acc[h * dim + j], exact, 1e-5 * (1.0 + std::abs(exact)) * std::sqrt(n)) << h << " " << j;
              }
            }
          }
  });
}

// Eight heads in one pass (AVX-512's tiles) give each head the bits of a four-head pass: the same
// products, added in the same order.
TEST(RowKernels, EightHeadsGiveTheBitsOfTwoFourHeadPasses) {
  const size_t heads = 8;
  testutil::for_each_target([&] {
    for (const simd::RowFormat format : {simd::RowFormat::kFloat, simd::RowFormat::kHalf, simd::RowFormat::kInt8})
      for (size_t dim : {20, 128})
        for (size_t n : {3, 70}) {
          SCOPED_TRACE(testing::Message() << "format " << static_cast<int>(format) << " dim " << dim << " n " << n);
          const StoredRows rows = make_rows(format, 0, n, dim, 11);
          RandomStream stream(3);
          std::vector<float> queries(heads * dim), weights(heads * n);
          for (auto& q : queries) q = static_cast<float>(stream.gaussian());
          for (auto& w : weights) w = static_cast<float>(stream.uniform());
          std::vector<float> scores(heads * n), acc(heads * dim, 0.5f);
          std::vector<float> quad_scores(heads * n), quad_acc(heads * dim, 0.5f);
          simd::row_scores(rows.source, n, queries.data(), heads, 0.5f, scores.data(), n);
          simd::row_weighted_sum(rows.source, n, weights.data(), heads, n, acc.data(), dim);
          for (size_t h = 0; h < heads; h += 4) {
            simd::row_scores(rows.source, n, queries.data() + h * dim, 4, 0.5f, quad_scores.data() + h * n, n);
            simd::row_weighted_sum(rows.source, n, weights.data() + h * n, 4, n, quad_acc.data() + h * dim, dim);
          }
          EXPECT_EQ(scores, quad_scores);
          EXPECT_EQ(acc, quad_acc);
        }
  });
}

// Rows spaced apart (a stride past their bytes, as a ChannelSplit part's rows are) give what the
// same rows packed one after another give; RowFeed asks for them a row at a time. Spaced index rows
// may load a partial last vector whole where packed ones take a scalar tail (the bytes after a row
// are readable there), so their sums may differ in the last bits; the other formats give the same
// bits. (Gathered rows: selection_storage_test.cpp.)
TEST(RowKernels, SpacedRowsGiveWhatTheirPackedCopiesGive) {
  const std::vector<Case> cases = {{simd::RowFormat::kHalf, 0}, {simd::RowFormat::kInt8, 0},
                                   {simd::RowFormat::kIndex, 3}, {simd::RowFormat::kFloat, 0}};
  const size_t n = 150, heads = 4;  // past the feed's 64 rows ahead
  testutil::for_each_target([&] {
    for (const Case& c : cases)
      for (size_t dim : {20, 128}) {
        SCOPED_TRACE(testing::Message() << "format " << static_cast<int>(c.format) << " dim " << dim);
        const StoredRows packed = make_rows(c.format, c.bits, n, dim, 5 + dim);
        const size_t stride = packed.source.stride;
        std::vector<uint8_t> spaced(3 * n * stride);
        for (size_t i = 0; i < n; ++i)
          std::memcpy(spaced.data() + 3 * i * stride, packed.bytes.data() + i * stride, stride);
        simd::RowSource spaced_rows = packed.source;
        spaced_rows.data = spaced.data();
        spaced_rows.stride = 3 * stride;
        spaced_rows.readable = stride;
        RandomStream stream(9);
        std::vector<float> queries(heads * dim), weights(heads * n);
        for (auto& q : queries) q = static_cast<float>(stream.gaussian());
        for (auto& w : weights) w = static_cast<float>(stream.uniform());
        const auto run = [&](const simd::RowSource& rows) {
          std::vector<float> out(heads * n + heads * dim, 0.25f);
          simd::row_scores(rows, n, queries.data(), heads, 0.5f, out.data(), n);
          simd::row_weighted_sum(rows, n, weights.data(), heads, n, out.data() + heads * n, dim);
          return out;
        };
        const std::vector<float> expected = run(packed.source), got = run(spaced_rows);
        if (c.format != simd::RowFormat::kIndex) {
          EXPECT_EQ(got, expected);
        } else {
          for (size_t k = 0; k < expected.size(); ++k)
            ASSERT_NEAR(got[k], expected[k], 1e-5 * (1.0 + std::abs(expected[k]))) << k;
        }
      }
  });
}
