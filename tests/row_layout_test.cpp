// RowLayout (kvsketch/row_layout.hpp): a kernel that knows only the layout, reading the rows byte
// by byte, gets every codec's scores and weighted sums; the fused kernels read rows through it.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "codec/codec_base.hpp"
#include "codec/quad_rows_codec.hpp"
#include "kvsketch/codec.hpp"
#include "kvsketch/half.hpp"
#include "kvsketch/sparse_attention.hpp"
#include "test_util.hpp"

namespace kvsketch {
namespace {

// Byte `at` of row r's plain row, wherever the layout puts it (in quads: simd/quad_rows.hpp).
uint8_t row_byte(const RowLayout& layout, const uint8_t* codes, size_t r, size_t at) {
  if (!layout.quads) return codes[r * layout.row_bytes + at];
  const uint8_t* quad = codes + (r / 4) * 4 * layout.row_bytes;
  for (const RowLayout::Field& field : layout.fields) {
    if (at < field.offset || at >= field.offset + field.bytes) continue;
    const size_t b = at - field.offset, k = b / field.chunk, full = field.bytes / field.chunk;
    if (k < full) return quad[4 * field.offset + (4 * k + r % 4) * field.chunk + b % field.chunk];
    const size_t tail = field.bytes - full * field.chunk;
    return quad[4 * field.offset + 4 * field.chunk * k + (r % 4) * tail + b % field.chunk];
  }
  ADD_FAILURE() << "byte " << at << " is in no field";
  return 0;
}

float factor_of(const RowLayout& layout, const uint8_t* codes, size_t r, const RowLayout::Factor& factor) {
  uint8_t bytes[4];
  for (size_t i = 0; i < (factor.half ? 2u : 4u); ++i) bytes[i] = row_byte(layout, codes, r, factor.offset + i);
  if (factor.half) {
    uint16_t half;
    std::memcpy(&half, bytes, 2);
    return half_to_float(half);
  }
  float value;
  std::memcpy(&value, bytes, 4);
  return value;
}

// The part's coordinate j of row r: table[index] times the factor.
float part_value(const RowLayout& layout, const uint8_t* codes, size_t r, const RowLayout::Part& part, size_t j) {
  const size_t bit = j * static_cast<size_t>(part.indices.bits);
  unsigned index = 0;
  for (int b = 0; b < part.indices.bits; ++b) {
    const size_t at = bit + static_cast<size_t>(b);
    index |= ((row_byte(layout, codes, r, part.indices.offset + at / 8) >> (at % 8)) & 1u) << b;
  }
  const float factor = part.factor ? factor_of(layout, codes, r, *part.factor) : 1.0f;
  return part.indices.table[index] * factor;
}

TEST(RowLayout, AKernelThatKnowsOnlyTheLayoutGetsTheCodecsAnswers) {
  const size_t n = 64, heads = 3;
  for (const std::string spec : {"tq_mse:b=3", "tq_prod:b=3", "tq_prod:b=1", "tq_mse:b=2.5", "tq_prod:b=3.5",
                                 "center:tq_mse:b=4", "rotate:q4_0", "q4_0", "tq_mse:b=3,norm=fp32"}) {
    for (const bool quads : {false, true}) {
      SCOPED_TRACE(spec + (quads ? " in quads" : ""));
      const size_t dim = 128;
      std::unique_ptr<CodecBase> codec = codec_base(make_codec(spec, dim, 3));
      if (quads) codec = std::make_unique<QuadRowsCodec>(std::move(codec));
      const auto rows = testutil::gaussian_matrix(n, dim, 5, 2.0);
      if (codec->calibrated_by_data()) codec->calibrate(rows.data(), n);
      CodeBuffer codes = codec->make_buffer();
      codec->encode(rows.data(), n, codes);
      const RowLayout& layout = codec->row_layout();
      ASSERT_TRUE(layout.has_keys);
      EXPECT_EQ(layout.quads, quads);
      EXPECT_EQ(layout.row_bytes, codec->code_bytes());
      size_t covered = 0;
      for (const RowLayout::Field& field : layout.fields) covered += field.bytes;
      EXPECT_EQ(covered, codec->code_bytes());

      const auto queries = testutil::gaussian_matrix(heads, dim, 7);
      std::vector<std::unique_ptr<PreparedQuery>> prepared;
      std::vector<const PreparedQuery*> pointers;
      for (size_t h = 0; h < heads; ++h) {
        prepared.push_back(codec->prepare(queries.data() + h * dim));
        pointers.push_back(prepared.back().get());
      }
      std::vector<float> expected(heads * n);
      codec->scores_multi(pointers.data(), heads, codes, 0, n, expected.data(), n, Arithmetic::kFloat);
      for (size_t h = 0; h < heads; ++h) {
        std::vector<float> q(layout.key_domain);
        codec->key_domain(*prepared[h], q.data());
        const float shift = layout.key_shift ? codec->key_shift(*prepared[h]) : 0.0f;
        for (size_t r = 0; r < n; ++r) {
          double score = shift;
          for (const RowLayout::KeyGroup& group : layout.key_groups) {
            double sum = 0.0;
            for (size_t p = group.first; p < group.first + group.count; ++p) {
              const RowLayout::Part& part = layout.key_parts[p];
              double dot = 0.0;
              for (size_t j = 0; j < part.indices.count; ++j)
                dot += q[part.domain + j] * part_value(layout, codes.data().data(), r, part, j);
              sum += part.scale * dot;
            }
            score += sum * (group.factor ? factor_of(layout, codes.data().data(), r, *group.factor) : 1.0f);
          }
          ASSERT_NEAR(score, expected[h * n + r], 1e-3 * (1.0 + std::abs(expected[h * n + r]))) << "row " << r;
        }
      }

      if (!layout.has_values) continue;
      const auto weights = testutil::gaussian_matrix(1, n, 9);
      std::vector<float> expected_acc(layout.accumulator, 0.0f), acc(layout.accumulator, 0.0f);
      codec->accumulate_partial_multi(weights.data(), 1, n, codes, 0, n, expected_acc.data(), Arithmetic::kFloat);
      for (size_t r = 0; r < n; ++r) {
        for (const RowLayout::Part& part : layout.value_parts)
          for (size_t j = 0; j < part.indices.count; ++j)
            acc[part.domain + j] += weights[r] * part_value(layout, codes.data().data(), r, part, j);
        for (const size_t slot : layout.weight_sums) acc[slot] += weights[r];
      }
      for (size_t j = 0; j < acc.size(); ++j) ASSERT_NEAR(acc[j], expected_acc[j], 1e-3) << "coordinate " << j;
    }
  }
}

TEST(RowLayout, CodecsWithoutAFusedFormAreOneField) {
  for (const std::string spec : {"int8", "fp16", "kivi_k:b=2", "q8_0", "qjl:m=64"}) {
    SCOPED_TRACE(spec);
    const auto codec = make_codec(spec, 64);
    const RowLayout& layout = codec->row_layout();
    EXPECT_FALSE(layout.has_keys);
    EXPECT_FALSE(layout.has_values);
    ASSERT_EQ(layout.fields.size(), 1u);
    EXPECT_EQ(layout.fields[0].bytes, codec->code_bytes());
  }
  // prod's keys have a form, its values none; q4_0's parts are its 32-channel groups.
  EXPECT_FALSE(make_codec("tq_prod:b=3", 64)->row_layout().has_values);
  const auto q4_0 = make_codec("q4_0", 96);  // the layout lives as long as its codec
  const RowLayout& q4 = q4_0->row_layout();
  ASSERT_EQ(q4.key_parts.size(), 3u);
  EXPECT_EQ(q4.key_parts[2].indices.offset, 32u);
  EXPECT_EQ(q4.key_parts[2].factor->offset, 48u + 4u);
}

// A VectorCodec derived outside the library: the library refuses it rather than cast it.
class ForeignCodec final : public VectorCodec {
 public:
  ForeignCodec() : VectorCodec(8) {}
  std::string spec() const override { return "foreign"; }
  size_t code_bytes() const override { return 32; }
  void encode(const float*, size_t n, CodeBuffer& out, const float*) const override { out.resize(out.size() + n); }
  void decode(const CodeBuffer&, size_t, size_t, float*) const override {}
  size_t first_non_finite_row(const CodeBuffer& codes) const override { return codes.size(); }
  std::unique_ptr<PreparedQuery> prepare(const float*) const override { return std::make_unique<PreparedQuery>(); }
  void prepare(const float*, std::unique_ptr<PreparedQuery>&) const override {}
  void scores(const PreparedQuery&, const CodeBuffer&, size_t, size_t, float*) const override {}
  void accumulate(const float*, const CodeBuffer&, size_t, size_t, float*) const override {}
  const RowLayout& row_layout() const override { return layout_; }

 private:
  RowLayout layout_;
};

TEST(RowLayout, ACodecTheLibraryDidNotBuildIsRefused) {
  const ForeignCodec foreign;
  CodeBuffer codes = foreign.make_buffer();
  foreign.encode(nullptr, 4, codes, nullptr);
  EXPECT_NE(testutil::error_of([&] { BodyView::compressed(foreign, codes, foreign, codes); })
                .find("codec foreign: not one the library built"),
            std::string::npos);
  EXPECT_NE(testutil::error_of([&] { codec_base(std::unique_ptr<VectorCodec>(std::make_unique<ForeignCodec>())); })
                .find("not one the library built"),
            std::string::npos);
}

}  // namespace
}  // namespace kvsketch
