// Rows in quads (simd/quad_rows.hpp): the layout's arithmetic, and the fused attention kernel
// reading quads with the same bits as reading the plain rows, on every target (AVX3_DL reads
// them as they lie where dim is a multiple of 16; elsewhere they are copied back first).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "kvsketch/bitpack.hpp"
#include "kvsketch/codebook.hpp"
#include "core/require.hpp"
#include "kvsketch/half.hpp"
#include "index_rows.hpp"
#include "simd/quad_rows.hpp"
#include "test_util.hpp"

namespace kvsketch {
namespace {

TEST(QuadRows, ChunksOfFourRowsSideBySide) {
  // 7 bytes in chunks of 3: chunks 0 and 1 whole, a last chunk of 1 byte.
  const simd::QuadField field{2, 7, 3};
  EXPECT_EQ(simd::quad_byte(field, 0, 0), 8u);
  EXPECT_EQ(simd::quad_byte(field, 1, 0), 11u);   // row 1's chunk 0 right after row 0's
  EXPECT_EQ(simd::quad_byte(field, 0, 3), 20u);   // chunk 1 after the four rows' chunk 0
  EXPECT_EQ(simd::quad_byte(field, 3, 5), 8u + 12 + 9 + 2);
  EXPECT_EQ(simd::quad_byte(field, 0, 6), 8u + 24);  // the short chunk: 1 byte a row
  EXPECT_EQ(simd::quad_byte(field, 3, 6), 8u + 27);
  // Every byte of the quad is used once: the layout takes no room.
  const std::vector<simd::QuadField> fields{{0, 2, 2}, {2, 7, 3}, {9, 1, 1}};
  std::vector<int> used(40, 0);
  for (const auto& f : fields)
    for (size_t r = 0; r < 4; ++r)
      for (size_t b = 0; b < f.bytes; ++b) ++used[simd::quad_byte(f, r, b)];
  EXPECT_EQ(used, std::vector<int>(40, 1));
}

TEST(QuadRows, RoundTripAndRefusals) {
  const size_t stride = 10, n = 8;
  std::vector<uint8_t> rows(n * stride);
  std::iota(rows.begin(), rows.end(), uint8_t{1});
  const std::vector<simd::QuadField> fields{{0, 7, 3}, {7, 2, 2}};
  std::vector<uint8_t> quads(n * stride);
  simd::quads_from_rows(rows.data(), stride, n, fields, quads.data());
  simd::RowSource source{simd::RowFormat::kIndex, quads.data(), stride, 16, 3};
  source.quads = true;
  const std::vector<uint8_t> back = simd::rows_from_quads(source, n, fields);
  for (size_t i = 0; i < n; ++i)
    for (size_t b = 0; b < stride; ++b)
      EXPECT_EQ(back[i * stride + b], b < 9 ? rows[i * stride + b] : 0) << i << " " << b;
  EXPECT_THROW(simd::rows_from_quads(source, 6, fields), Error);  // not whole quads
  EXPECT_THROW(simd::rows_from_quads(source, n, {{8, 4, 2}}), Error);  // past the row
}

// Rows of b-bit indices with an fp16 factor after them (IndexRowsData), plain and in quads.
struct Rows {
  testutil::IndexRowsData plain;
  std::vector<uint8_t> quads;
  simd::RowSource source, quad_source;
  Rows(size_t n, size_t dim, int bits, const float* table, uint64_t seed)
      : plain(n, dim, bits, table, seed), quads(plain.codes.size(), 0), source(plain.source) {
    const size_t packed = packed_bytes(dim, bits), stride = source.stride;
    for (size_t i = 0; i < n; ++i) {  // factors rising along the rows, so that the running maximum moves
      const uint16_t factor = float_to_half(static_cast<float>(0.5 + 3.0 * i / n));
      std::memcpy(plain.codes.data() + i * stride + packed, &factor, sizeof(factor));
    }
    const std::vector<simd::QuadField> fields{{0, packed, static_cast<size_t>(bits)}, {packed, 2, 2}};
    simd::quads_from_rows(plain.codes.data(), stride, n, fields, quads.data());
    quad_source = source;
    quad_source.data = quads.data();
    quad_source.quads = true;
  }
};

TEST(QuadRows, FusedAttentionReadsQuadsWithTheSameBits) {
  struct Part {
    size_t dim;
    int bits;
  };
  struct Layout {
    std::vector<Part> keys, values;  // keys: one group of one part, or the outlier split's two
  };
  const std::vector<Layout> layouts = {{{{128, 3}}, {{128, 3}}}, {{{64, 1}}, {{64, 4}}}, {{{256, 2}}, {{256, 3}}},
                                       {{{32, 3}, {96, 2}}, {{32, 4}, {96, 3}}},
                                       {{{40, 3}}, {{36, 2}}}};  // not whole octet pairs: copied back
  testutil::for_each_target([&] {
    for (size_t l = 0; l < layouts.size(); ++l)
      for (const size_t n : {size_t{4}, size_t{64}, size_t{200}, size_t{1000}})
        for (const size_t heads : {size_t{1}, size_t{4}, size_t{6}}) {
          SCOPED_TRACE(testing::Message() << "layout " << l << " n " << n << " heads " << heads);
          const Layout& layout = layouts[l];
          std::vector<std::unique_ptr<Rows>> rows;
          std::vector<std::vector<float>> queries;
          const auto make = [&](const Part& part, uint64_t seed) -> Rows& {
            const auto& table = lloyd_max_codebook(CoordinateLaw::kBeta, part.dim, part.bits).centroids;
            return *rows.emplace_back(std::make_unique<Rows>(n, part.dim, part.bits, table.data(), seed));
          };
          std::vector<simd::AttentionPart> keys[2], values[2];
          size_t width = 0;
          for (const Part& part : layout.values) width += part.dim;
          std::vector<float> acc[2] = {std::vector<float>(heads * width, 0.0f),
                                       std::vector<float>(heads * width, 0.0f)};
          for (size_t p = 0; p < layout.keys.size(); ++p) {
            const Rows& part = make(layout.keys[p], 11 * n + p);
            queries.push_back(testutil::gaussian_matrix(heads, layout.keys[p].dim, 5 * heads + p));
            const simd::RowFactor factor{packed_bytes(layout.keys[p].dim, layout.keys[p].bits), true};
            for (int q = 0; q < 2; ++q) {
              keys[q].push_back({q ? part.quad_source : part.source, factor, queries.back().data()});
              keys[q].back().scale = 3.0f;
            }
          }
          for (size_t p = 0, offset = 0; p < layout.values.size(); offset += layout.values[p].dim, ++p) {
            const Rows& part = make(layout.values[p], 13 * n + p);
            const simd::RowFactor factor{packed_bytes(layout.values[p].dim, layout.values[p].bits), true};
            for (int q = 0; q < 2; ++q)
              values[q].push_back({q ? part.quad_source : part.source, factor, nullptr, acc[q].data() + offset, width});
          }
          std::vector<float> max[2], sum[2];
          bool ran[2];
          for (int q = 0; q < 2; ++q) {
            std::vector<simd::AttentionKeyGroup> groups;
            for (auto& part : keys[q]) groups.push_back({&part, 1, nullptr});
            const simd::AttentionKeys attention_keys{groups.data(), groups.size(), nullptr};
            max[q].assign(heads, 0.0f);
            sum[q].assign(heads, 0.0f);
            ran[q] = simd::int_index_attention(attention_keys, values[q].data(), values[q].size(), n, heads,
                                               max[q].data(), sum[q].data());
          }
          ASSERT_EQ(ran[0], ran[1]);
          if (!ran[0]) continue;  // no fused kernel on this target
          EXPECT_EQ(max[1], max[0]);
          EXPECT_EQ(sum[1], sum[0]);
          EXPECT_EQ(acc[1], acc[0]);
        }
  });
}

}  // namespace
}  // namespace kvsketch
