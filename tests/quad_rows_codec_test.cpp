// QuadRowsCodec (codec/quad_rows_codec.hpp): the same codes as its inner codec, stored in quads, and
// the same results from every path (scores, weighted sums, decode, scattered rows, the fused attention).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "codec/codec_base.hpp"
#include "codec/quad_rows_codec.hpp"
#include "kvsketch/codec.hpp"
#include "core/require.hpp"
#include "test_util.hpp"

namespace kvsketch {
namespace {

struct Pair {
  std::unique_ptr<CodecBase> plain, quads;
  CodeBuffer plain_codes, quad_codes;
  Pair(const std::string& spec, size_t dim, const std::vector<float>& rows, size_t n)
      : plain(codec_base(make_codec(spec, dim, 11))),
        quads(std::make_unique<QuadRowsCodec>(make_codec(spec, dim, 11))) {
    if (plain->calibrated_by_data()) {
      plain->calibrate(rows.data(), n);
      quads->calibrate(rows.data(), n);
    }
    plain_codes = plain->make_buffer();
    quad_codes = quads->make_buffer();
    plain->encode(rows.data(), n, plain_codes);
    quads->encode(rows.data(), n, quad_codes);
  }
};

std::vector<std::unique_ptr<PreparedQuery>> prepared(const VectorCodec& codec, const std::vector<float>& queries,
                                                     size_t heads) {
  std::vector<std::unique_ptr<PreparedQuery>> out;
  for (size_t h = 0; h < heads; ++h) out.push_back(codec.prepare(queries.data() + h * codec.dim()));
  return out;
}

std::vector<const PreparedQuery*> pointers(const std::vector<std::unique_ptr<PreparedQuery>>& queries) {
  std::vector<const PreparedQuery*> out;
  for (const auto& q : queries) out.push_back(q.get());
  return out;
}

TEST(QuadRowsCodec, SameCodesInQuadsAndSameResults) {
  const size_t n = 96, heads = 4;
  for (const std::string spec : {"tq_mse:b=3", "tq_prod:b=3", "tq_mse:b=2.5", "tq_prod:b=1", "center:tq_mse:b=4",
                                 "tq_mse:b=4,norm=fp32", "int8", "kivi_k:b=2", "qjl", "q4_0"}) {
    for (const size_t dim : {size_t{128}, size_t{40}}) {
      SCOPED_TRACE(spec + " d=" + std::to_string(dim));
      const auto rows = testutil::gaussian_matrix(n, dim, 3);
      Pair pair(spec, dim, rows, n);
      const auto& codec = static_cast<const QuadRowsCodec&>(*pair.quads);
      EXPECT_EQ(codec.spec(), pair.plain->spec());  // the packing is not part of the spec
      EXPECT_EQ(codec.code_bytes(), pair.plain->code_bytes());
      ASSERT_EQ(pair.quad_codes.bytes(), pair.plain_codes.bytes());
      // The same bytes moved: back to plain rows they are SPEC's codes; TurboQuant's do move.
      std::vector<uint8_t> back(pair.plain_codes.bytes());
      codec.layout().to_rows(pair.quad_codes.data().data(), n, back.data());
      EXPECT_EQ(back, pair.plain_codes.data());
      if (spec.find("tq_") != std::string::npos || spec == "q4_0") EXPECT_NE(pair.quad_codes.data(), pair.plain_codes.data());

      std::vector<float> decoded_plain(n * dim), decoded_quads(n * dim);
      pair.plain->decode(pair.plain_codes, 0, n, decoded_plain.data());
      pair.quads->decode(pair.quad_codes, 0, n, decoded_quads.data());
      EXPECT_EQ(decoded_quads, decoded_plain);

      const auto queries = testutil::gaussian_matrix(heads, dim, 5);
      const auto plain_queries = prepared(*pair.plain, queries, heads);
      const auto quad_queries = prepared(*pair.quads, queries, heads);
      for (const Arithmetic arithmetic : {Arithmetic::kFloat, Arithmetic::kInteger}) {
        std::vector<float> plain_scores(heads * n), quad_scores(heads * n);
        pair.plain->scores_multi(pointers(plain_queries).data(), heads, pair.plain_codes, 0, n, plain_scores.data(),
                                 n, arithmetic);
        pair.quads->scores_multi(pointers(quad_queries).data(), heads, pair.quad_codes, 0, n, quad_scores.data(), n,
                                 arithmetic);
        EXPECT_EQ(quad_scores, plain_scores);
        std::vector<float> plain_acc(heads * codec.accumulator_size()), quad_acc(plain_acc.size());
        pair.plain->accumulate_partial_multi(plain_scores.data(), heads, n, pair.plain_codes, 0, n, plain_acc.data(),
                                             arithmetic);
        pair.quads->accumulate_partial_multi(plain_scores.data(), heads, n, pair.quad_codes, 0, n, quad_acc.data(),
                                             arithmetic);
        EXPECT_EQ(quad_acc, plain_acc);
      }
      std::vector<float> plain_one(n), quad_one(n);
      pair.plain->scores(*plain_queries[0], pair.plain_codes, 0, n, plain_one.data());
      pair.quads->scores(*quad_queries[0], pair.quad_codes, 0, n, quad_one.data());
      EXPECT_EQ(quad_one, plain_one);

      // Scattered rows, where SPEC's rows stand alone.
      ASSERT_EQ(pair.quads->reads_scattered_rows(), pair.plain->row_group() == 1);
      if (!pair.quads->reads_scattered_rows()) continue;
      const std::vector<uint32_t> picked{93, 0, 5, 6, 7, 42, 42, 1, 95};
      std::vector<float> plain_at(picked.size()), quad_at(picked.size());
      pair.plain->scores_at(*plain_queries[1], pair.plain_codes, picked.data(), picked.size(), plain_at.data());
      pair.quads->scores_at(*quad_queries[1], pair.quad_codes, picked.data(), picked.size(), quad_at.data());
      EXPECT_EQ(quad_at, plain_at);
      std::vector<float> plain_sum(codec.accumulator_size()), quad_sum(plain_sum.size());
      pair.plain->accumulate_partial_at(plain_at.data(), pair.plain_codes, picked.data(), picked.size(),
                                        plain_sum.data());
      pair.quads->accumulate_partial_at(plain_at.data(), pair.quad_codes, picked.data(), picked.size(),
                                        quad_sum.data());
      EXPECT_EQ(quad_sum, plain_sum);
    }
  }
}

TEST(QuadRowsCodec, FusedAttentionInQuadsGivesThePlainBits) {
  const size_t n = 256, heads = 4;
  for (const auto& [keys, values] : std::vector<std::pair<std::string, std::string>>{
           {"tq_mse:b=3", "tq_mse:b=3"},
           {"tq_prod:b=3", "tq_mse:b=3"},
           {"tq_mse:b=2.5", "tq_mse:b=3"},
           {"center:tq_mse:b=2", "tq_mse:b=3"},
           {"q4_0", "q4_0"}}) {
    for (const size_t dim : {size_t{128}, size_t{96}, size_t{40}}) {
      SCOPED_TRACE(keys + " d=" + std::to_string(dim));
      const auto key_rows = testutil::gaussian_matrix(n, dim, 7), value_rows = testutil::gaussian_matrix(n, dim, 8);
      Pair k(keys, dim, key_rows, n), v(values, dim, value_rows, n);
      const auto queries = testutil::gaussian_matrix(heads, dim, 9, 2.0);
      const size_t width = v.plain->accumulator_size();
      // Whether a fused kernel ran (none on the scalar targets) and what it wrote.
      const auto run = [&](const CodecBase& key_codec, const CodeBuffer& key_codes, const CodecBase& value_codec,
                           const CodeBuffer& value_codes) {
        const auto prepared_queries = prepared(key_codec, queries, heads);
        std::vector<float> out(2 * heads + heads * width, 0.0f);
        const bool fused = key_codec.attend_multi(pointers(prepared_queries).data(), heads, key_codes, value_codec,
                                                  value_codes, 32, n - 64, out.data(), out.data() + heads,
                                                  out.data() + 2 * heads, Arithmetic::kInteger);
        return std::make_pair(fused, out);
      };
      size_t fused_targets = 0;
      testutil::for_each_target([&] {
        const auto plain = run(*k.plain, k.plain_codes, *v.plain, v.plain_codes);
        fused_targets += plain.first;
        EXPECT_EQ(run(*k.quads, k.quad_codes, *v.quads, v.quad_codes), plain);
        EXPECT_EQ(run(*k.quads, k.quad_codes, *v.plain, v.plain_codes), plain);
        EXPECT_EQ(run(*k.plain, k.plain_codes, *v.quads, v.quad_codes), plain);
      });
#ifndef KVSKETCH_PORTABLE  // Highway's portable target has no fused kernel
      EXPECT_GT(fused_targets, 0u);
#endif
    }
  }
}

TEST(QuadRowsCodec, Refusals) {
  const auto quads = [](const std::string& spec) { return std::make_unique<QuadRowsCodec>(make_codec(spec, 64)); };
  const auto codec = quads("tq_mse:b=3");
  EXPECT_EQ(codec->row_group(), 4u);
  EXPECT_EQ(quads("kivi_k:b=2,group=6")->row_group(), 12u);
  CodeBuffer codes = codec->make_buffer();
  const auto rows = testutil::gaussian_matrix(8, 64, 1);
  EXPECT_NE(testutil::error_of([&] { codec->encode(rows.data(), 6, codes); }).find("whole groups of 4"),
            std::string::npos);
  EXPECT_EQ(codes.size(), 0u);
  codec->encode(rows.data(), 8, codes);
  std::vector<float> out(64 * 8);
  EXPECT_NE(testutil::error_of([&] { codec->decode(codes, 2, 4, out.data()); }).find("group of 4"),
            std::string::npos);
  // A packing, not a codec: no spec names it.
  EXPECT_NE(testutil::error_of([&] { make_codec("quads:tq_mse:b=3", 64); }).find("unknown codec 'quads'"),
            std::string::npos);
  const uint32_t past[] = {8};
  const auto q = codec->prepare(rows.data());
  float score;
  EXPECT_THROW(codec->scores_at(*q, codes, past, 1, &score), Error);
  EXPECT_FALSE(quads("kivi_k:b=2")->reads_scattered_rows());
}

}  // namespace
}  // namespace kvsketch
