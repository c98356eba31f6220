// Selection attention over every storage of the body: gathered rows in the row kernels, scattered
// code rows in the codecs, a KVCache's compressed body read straight from its codes, and selectors
// used from several threads at once.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>

#include "codec/codec_base.hpp"
#include "kvsketch/attention.hpp"
#include "kvsketch/codec.hpp"
#include "kvsketch/half.hpp"
#include "kvsketch/kv_cache.hpp"
#include "kvsketch/sparse_attention.hpp"
#include "kvsketch/eval/sparse_eval.hpp"
#include "kvsketch/eval/synthetic_cache.hpp"
#include "simd/row_kernels.hpp"
#include "test_util.hpp"

using namespace kvsketch;

namespace {

// Every 7th of n rows and the last one (the row a wide load could run past).
std::vector<uint32_t> scattered_rows(size_t n) {
  std::vector<uint32_t> rows;
  for (uint32_t i = 3; i + 1 < n; i += 7) rows.push_back(i);
  rows.push_back(static_cast<uint32_t>(n - 1));
  return rows;
}

std::vector<float> to_floats(const std::vector<uint16_t>& halves) {
  std::vector<float> out(halves.size());
  for (size_t i = 0; i < halves.size(); ++i) out[i] = half_to_float(halves[i]);
  return out;
}

}  // namespace

// A gather reads exactly what the same rows copied next to each other give, in every format and
// on every instruction set, for one and for four query heads.
TEST(RowKernels, GatherReadsTheSameRowsAsAContiguousCopy) {
  const size_t n = 300, d = 128;
  const auto x = testutil::gaussian_matrix(n, d, 1);
  // Float and fp16 rows hold x; the integer formats take any bytes.
  std::vector<uint8_t> float_bytes(n * d * 4), half_bytes(n * d * 2), any_bytes(n * d);
  std::memcpy(float_bytes.data(), x.data(), float_bytes.size());
  for (size_t i = 0; i < n * d; ++i) {
    const uint16_t h = float_to_half(x[i]);
    std::memcpy(half_bytes.data() + 2 * i, &h, 2);
    any_bytes[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  }
  static const float table[8] = {-1.7f, -1.0f, -0.5f, -0.1f, 0.1f, 0.5f, 1.0f, 1.7f};
  const std::vector<uint32_t> rows = scattered_rows(n);
  const auto queries = testutil::gaussian_matrix(4, d, 2);
  const auto weights = testutil::gaussian_matrix(4, rows.size(), 3);
  struct Format {
    simd::RowFormat format;
    size_t stride;
    int bits;
  };
  for (const Format f : {Format{simd::RowFormat::kFloat, 4 * d, 0}, Format{simd::RowFormat::kHalf, 2 * d, 0},
                         Format{simd::RowFormat::kInt8, d, 0}, Format{simd::RowFormat::kIndex, 3 * d / 8, 3},
                         Format{simd::RowFormat::kIndex, d / 4, 2}, Format{simd::RowFormat::kSign, d / 8, 1}})
    testutil::for_each_target([&] {
      SCOPED_TRACE(static_cast<int>(f.format) * 10 + f.bits);
      const std::vector<uint8_t>& bytes = f.format == simd::RowFormat::kFloat  ? float_bytes
                                          : f.format == simd::RowFormat::kHalf ? half_bytes
                                                                               : any_bytes;
      std::vector<uint8_t> copy(rows.size() * f.stride);
      for (size_t s = 0; s < rows.size(); ++s)
        std::memcpy(copy.data() + s * f.stride, bytes.data() + rows[s] * f.stride, f.stride);
      simd::RowSource gathered{f.format, bytes.data(), f.stride, d, f.bits, table};
      gathered.indices = rows.data();
      const simd::RowSource contiguous{f.format, copy.data(), f.stride, d, f.bits, table};
      for (const size_t heads : {size_t{1}, size_t{4}}) {
        const size_t m = rows.size();
        std::vector<float> a(heads * m), b(heads * m), acc_a(heads * d, 0.0f), acc_b(heads * d, 0.0f);
        simd::row_scores(gathered, m, queries.data(), heads, 0.5f, a.data(), m);
        simd::row_scores(contiguous, m, queries.data(), heads, 0.5f, b.data(), m);
        EXPECT_EQ(a, b);
        simd::row_weighted_sum(gathered, m, weights.data(), heads, m, acc_a.data(), d);
        simd::row_weighted_sum(contiguous, m, weights.data(), heads, m, acc_b.data(), d);
        EXPECT_EQ(acc_a, acc_b);
      }
    });
}

// Scattered code rows score exactly as the same rows one at a time, and sum exactly as the same rows
// stored together (they are gathered in blocks); one at a time they sum to the same within float
// rounding (some codecs add per-call terms once per call). Codecs whose rows do not stand alone and
// rows out of range are refused.
TEST(VectorCodec, ScatteredRowsMatchRowByRowAndBadRowsAreRefused) {
  const size_t n = 200, d = 128;
  const auto x = testutil::gaussian_matrix(n, d, 4);
  const auto q = testutil::gaussian_matrix(1, d, 5);
  const std::vector<uint32_t> rows = scattered_rows(n);
  const auto weights = testutil::gaussian_matrix(1, rows.size(), 6);
  for (const std::string spec : {"tq_prod:b=3", "tq_mse:b=2", "qjl:m=256", "int8", "fp16", "q4_0", "center:tq_mse:b=3"}) {
    SCOPED_TRACE(spec);
    auto codec = codec_base(make_codec(spec, d, 7));
    if (codec->calibrated_by_data()) codec->calibrate(x.data(), n);
    CodeBuffer codes = codec->make_buffer();
    codec->encode(x.data(), n, codes);
    const auto prepared = codec->prepare(q.data());
    std::vector<float> gathered(rows.size()), one(1);
    codec->scores_at(*prepared, codes, rows.data(), rows.size(), gathered.data());
    std::vector<float> acc_gathered(codec->accumulator_size(), 0.0f), acc_one(codec->accumulator_size(), 0.0f);
    codec->accumulate_partial_at(weights.data(), codes, rows.data(), rows.size(), acc_gathered.data());
    std::vector<float> together(rows.size() * d);
    for (size_t s = 0; s < rows.size(); ++s) {
      codec->scores(*prepared, codes, rows[s], 1, one.data());
      EXPECT_EQ(gathered[s], one[0]);
      codec->accumulate_partial(weights.data() + s, codes, rows[s], 1, acc_one.data());
      std::copy_n(x.data() + rows[s] * d, d, together.data() + s * d);
    }
    CodeBuffer stored_together = codec->make_buffer();
    codec->encode(together.data(), rows.size(), stored_together);
    std::vector<float> acc_together(codec->accumulator_size(), 0.0f);
    codec->accumulate_partial(weights.data(), stored_together, 0, rows.size(), acc_together.data());
    EXPECT_EQ(acc_gathered, acc_together);
    for (size_t j = 0; j < acc_one.size(); ++j)
      EXPECT_NEAR(acc_gathered[j], acc_one[j], 1e-5 * (1.0 + std::abs(acc_one[j]))) << j;
    const uint32_t outside[] = {3, static_cast<uint32_t>(n)};
    EXPECT_NE(testutil::error_of([&] { codec->scores_at(*prepared, codes, outside, 2, one.data()); }).find("row 200 out of range"),
              std::string::npos);
  }
  auto kivi = codec_base(make_codec("kivi_k:b=2", d, 7));
  CodeBuffer codes = kivi->make_buffer();
  kivi->encode(x.data(), 192, codes);
  const auto prepared = kivi->prepare(q.data());
  float out[2];
  const uint32_t two[] = {1, 5};
  EXPECT_NE(testutil::error_of([&] { kivi->scores_at(*prepared, codes, two, 2, out); }).find("groups of 32"),
            std::string::npos);
}

// A KVCache's compressed body read by the selection attention: with every body token selected and
// the exact fp16 sinks and window merged in, it is the cache's own decode attention.
TEST(WeightedAttention, CompressedBodyOfACacheGivesTheCachesDecodeAttention) {
  const size_t d = 128, n = 1000;
  for (const std::string policy : {"tq_prod:b=3|tq_mse:b=3", "qjl:m=256|int8", "split:tq_mse:b=4@32+tq_mse:b=2@96|tq_mse:b=2"}) {
    SCOPED_TRACE(policy);
    KVCache cache(1, 1, d, KVPolicy::parse(policy), 3);
    const auto keys = testutil::gaussian_matrix(n, d, 8), values = testutil::gaussian_matrix(n, d, 9);
    cache.append(0, keys.data(), values.data(), n);
    const HeadCache& head = cache.head(0, 0);
    const BodyView body = BodyView::of(cache, 0, 0);
    ASSERT_EQ(body.tokens, head.body_count());
    ASSERT_GT(body.tokens, 700u);
    TokenSelection all;
    for (uint32_t t = 0; t < body.tokens; ++t) all.tokens.push_back(t);
    all.log_weights.assign(body.tokens, 0.0f);
    for (uint64_t seed : {10, 11, 12}) {
      const auto query = testutil::gaussian_matrix(1, d, seed, 2.0);
      AttentionResult out = weighted_attention(query.data(), body, all);
      const auto sink_keys = to_floats(head.sink_keys), sink_values = to_floats(head.sink_values);
      const auto window_keys = to_floats(head.window_keys), window_values = to_floats(head.window_values);
      merge_attention(out, reference_attention(query.data(), 1, sink_keys.data(), sink_values.data(), head.sink_count, d));
      merge_attention(out, reference_attention(query.data(), 1, window_keys.data(), window_values.data(),
                                               head.window_count, d));
      AttentionOptions options;
      options.threads = 1;
      options.arithmetic = Arithmetic::kFloat;
      const AttentionResult decoded = decode_attention(cache, 0, 0, query.data(), 1, options);
      EXPECT_NEAR(out.lse[0], decoded.lse[0], 1e-4f);
      const double scale = testutil::norm(decoded.output.data(), d);
      for (size_t j = 0; j < d; ++j) EXPECT_NEAR(out.output[j], decoded.output[j], 1e-5 * scale + 1e-6);
    }
  }
  // A view whose parts disagree is refused, naming them.
  KVCache cache(1, 1, d, KVPolicy::parse("tq_mse:b=3"), 3);
  const auto keys = testutil::gaussian_matrix(400, d, 8);
  cache.append(0, keys.data(), keys.data(), 400);
  BodyView body = BodyView::of(cache, 0, 0);
  body.tokens += 1;
  EXPECT_NE(testutil::error_of([&] { weighted_attention(keys.data(), body, {}); }).find("code rows for"),
            std::string::npos);
  body = BodyView::of(cache, 0, 0);
  body.half_keys = reinterpret_cast<const uint16_t*>(keys.data());
  EXPECT_NE(testutil::error_of([&] { weighted_attention(keys.data(), body, {}); }).find("exactly one storage"),
            std::string::npos);
}

// `kvsketch sparse --body`: selectors over a TurboQuant body keep their accuracy, read real codes
// (exact attention over them is no longer exact) and hold the bytes the codes take.
TEST(SparseEval, SelectionFromATurboQuantBody) {
  SyntheticCache s = make_synthetic_cache("long-tailed", 4096, 128, 16, 1, SyntheticModel::kHiddenState);
  const AttentionCase data{"long-tailed", s.tokens, s.dim, s.queries, std::move(s.keys), std::move(s.values),
                           std::move(s.query_rows)};
  SparseEvalConfig config;
  config.methods = {"exact", "magicpig:K=10,L=150", "balancekv:ratio=0.25"};
  const auto plain = run_sparse_eval(data, config);
  config.body = "tq_prod:b=4|tq_mse:b=4";
  const auto coded = run_sparse_eval(data, config);
  ASSERT_EQ(coded.size(), 3u);
  EXPECT_LT(plain[0].rel_error, 1e-5);  // exact but for the sum order
  EXPECT_GT(coded[0].rel_error, 0.005);  // the codes' own error: 4 bits
  EXPECT_LT(coded[0].rel_error, 0.08);
  for (size_t m = 1; m < 3; ++m) {
    SCOPED_TRACE(coded[m].method);
    EXPECT_EQ(coded[m].budget, plain[m].budget);  // the same selection: selectors index the original keys
    EXPECT_LT(std::fabs(coded[m].rel_error - plain[m].rel_error), 0.05);
  }
  EXPECT_EQ(coded[0].body.substr(0, 11), "tq_prod:b=4");
  // 4-bit codes with fp16 norms (and the prod variant's residual norm): about a quarter of fp16.
  const double fraction = static_cast<double>(coded[0].kv_bytes) / static_cast<double>(plain[0].kv_bytes);
  EXPECT_GT(fraction, 0.25);
  EXPECT_LT(fraction, 0.30);
  for (const std::string bad : {"tq_mse:b=3|kivi_v:b=2|fp16", "tq_mse:b=3|"}) {
    config.body = bad;
    EXPECT_NE(testutil::error_of([&] { run_sparse_eval(data, config); }).find("KEY|VALUE"), std::string::npos) << bad;
  }
  config.body = "kivi_k:b=2|kivi_v:b=2";
  EXPECT_NE(testutil::error_of([&] { run_sparse_eval(data, config); }).find("groups of 32"), std::string::npos);
}

// Identical keys and all-zero values: the standard comparison still runs (MagicPIG's centred keys
// are all zero and it samples nothing; its baselines used to be asked for budget=0.0000, which is
// refused) and every row's rel_error is a number (0/0 was NaN).
TEST(SparseEval, DegenerateCachesGiveNumbers) {
  const size_t tokens = 400, d = 16, queries = 2;
  const AttentionCase data{"constant", tokens, d, queries, std::vector<float>(tokens * d, 1.0f),
                           std::vector<float>(tokens * d, 0.0f), testutil::gaussian_matrix(queries, d, 3)};
  const auto rows = run_sparse_eval(data, SparseEvalConfig{});
  ASSERT_GT(rows.size(), 3u);
  EXPECT_EQ(rows[0].budget, 0.0) << rows[0].method;
  EXPECT_EQ(rows[1].method, "topk:budget=0.0001");
  for (const SparseEvalRow& row : rows) {
    SCOPED_TRACE(row.method);
    EXPECT_EQ(row.rel_error, 0.0);
    EXPECT_TRUE(std::isfinite(row.kl) && std::isfinite(row.lse_error));
  }
}

// Selectors answer queries from several threads at once with the bits of one thread.
TEST(Selectors, ConcurrentQueriesGiveTheBitsOfOneThread) {
  const size_t d = 128, n = 70000, queries = 16;  // past one LSH block (61,440 tokens)
  SyntheticCache s = make_synthetic_cache("long-tailed", n, d, queries, 2, SyntheticModel::kHiddenState);
  const BodyView body{s.keys.data(), s.values.data(), n, d};
  for (const std::string spec :
       {"magicpig:K=8,L=30", "magicpig:K=13,L=40,hits=1", "uniform:budget=0.05", "oracle:budget=0.05", "topk:budget=0.02",
        "balancekv:ratio=0.125"}) {
    SCOPED_TRACE(spec);
    auto selector = make_selector(spec, d, 3);
    selector->append(s.keys.data(), s.values.data(), n - 1000);
    for (size_t t = n - 1000; t < n; ++t) selector->append(s.keys.data() + t * d, s.values.data() + t * d, 1);
    std::vector<AttentionResult> serial(queries), parallel(queries);
    std::vector<TokenSelection> serial_sel(queries), parallel_sel(queries);
    for (size_t q = 0; q < queries; ++q) {
      serial_sel[q] = selector->select(s.query_rows.data() + q * d, body, q);
      serial[q] = weighted_attention(s.query_rows.data() + q * d, body, serial_sel[q]);
    }
    std::vector<std::thread> threads;
    for (size_t w = 0; w < 4; ++w)
      threads.emplace_back([&, w] {
        for (size_t q = w; q < queries; q += 4) {
          parallel_sel[q] = selector->select(s.query_rows.data() + q * d, body, q);
          parallel[q] = weighted_attention(s.query_rows.data() + q * d, body, parallel_sel[q]);
        }
      });
    for (auto& thread : threads) thread.join();
    for (size_t q = 0; q < queries; ++q) {
      EXPECT_EQ(parallel_sel[q].tokens, serial_sel[q].tokens);
      EXPECT_EQ(parallel_sel[q].log_weights, serial_sel[q].log_weights);
      EXPECT_EQ(parallel[q].output, serial[q].output);
      EXPECT_EQ(parallel[q].lse, serial[q].lse);
    }
    EXPECT_FALSE(serial_sel[0].tokens.empty());
  }
}
