#include <cstdio>
#include <gtest/gtest.h>

#include <limits>

#include <cmath>

#include "core/team_size.hpp"
#include "kvsketch/attention.hpp"
#include "kvsketch/eval/attention_eval.hpp"
#include "core/require.hpp"
#include "kvsketch/half.hpp"
#include "kvsketch/eval/synthetic_cache.hpp"
#include "test_util.hpp"

namespace kvsketch {
namespace {

std::vector<float> rounded_to_half(std::vector<float> x) {
  for (float& v : x) v = half_to_float(float_to_half(v));
  return x;
}

double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / norm);
}

AttentionCase synthetic(const std::string& regime, size_t tokens, size_t queries, uint64_t seed = 1) {
  SyntheticCache s = make_synthetic_cache(regime, tokens, 128, queries, seed);
  return {regime, s.tokens, s.dim, s.queries, s.keys, s.values, s.query_rows};
}

TEST(Attention, Fp16CacheMatchesExactAttentionOnTheSameHalves) {
  const size_t dim = 96, n = 3000, heads = 4;
  const auto keys = testutil::gaussian_matrix(n, dim, 1, 0.5);
  const auto values = testutil::gaussian_matrix(n, dim, 2);
  const auto queries = testutil::gaussian_matrix(heads, dim, 3);
  KVCache cache(1, 1, dim, KVPolicy::parse("fp16|window=200"), 1);
  cache.append(0, keys.data(), values.data(), n);
  const auto exact = reference_attention(queries.data(), heads, rounded_to_half(keys).data(),
                                         rounded_to_half(values).data(), n, dim);
  for (size_t per_task : {size_t{100}, size_t{8192}}) {
    AttentionOptions options;
    options.tokens_per_task = per_task;
    const auto got = decode_attention(cache, 0, 0, queries.data(), heads, options);
    EXPECT_LT(relative_difference(got.output, exact.output), 1e-5) << per_task;
    for (size_t h = 0; h < heads; ++h) EXPECT_NEAR(got.lse[h], exact.lse[h], 1e-4);
  }
}

// The exact part alone (no body yet): the sinks and the two halves of the window are separate
// items of the parallel loop. Only sinks, one window token (an empty first half), an odd window:
// each the exact answer, and the same bits on one thread as on two.
TEST(Attention, SinksAndWindowHalvesGiveTheExactAnswerOnAnyThreadCount) {
  const size_t dim = 64, heads = 3;
  const auto queries = testutil::gaussian_matrix(heads, dim, 3);
  for (size_t n : {size_t{3}, size_t{5}, size_t{81}}) {
    const auto keys = testutil::gaussian_matrix(n, dim, 1, 0.5);
    const auto values = testutil::gaussian_matrix(n, dim, 2);
    KVCache cache(1, 1, dim, KVPolicy::parse("tq_mse:b=3|window=128"), 1);
    cache.append(0, keys.data(), values.data(), n);
    ASSERT_EQ(cache.head(0, 0).body_count(), 0u) << n;
    const auto exact = reference_attention(queries.data(), heads, rounded_to_half(keys).data(),
                                           rounded_to_half(values).data(), n, dim);
    AttentionOptions one;
    one.threads = 1;
    const auto expected = decode_attention(cache, 0, 0, queries.data(), heads, one);
    EXPECT_LT(relative_difference(expected.output, exact.output), 1e-5) << n;
    for (size_t h = 0; h < heads; ++h) EXPECT_NEAR(expected.lse[h], exact.lse[h], 1e-4) << n;
    AttentionOptions two;
    two.threads = 2;
    const auto got = decode_attention(cache, 0, 0, queries.data(), heads, two);
    EXPECT_EQ(got.output, expected.output) << n;
    EXPECT_EQ(got.lse, expected.lse) << n;
  }
}

// Split into token ranges and merged by log-sum-exp, the float kernels give the whole body's answer
// up to float rounding. The integer kernels round each block's weights against the block's largest
// within its range, so other ranges round differently: that stays within a tenth of the codec's
// error (the bound of IntegerKernelsMatchFloatKernelsAndEveryTarget).
TEST(Attention, TokenRangesAndThreadsMergeToTheSameAnswer) {
  const auto data = synthetic("long-tailed", 5000, 4);
  const auto exact = reference_attention(data.query_rows.data(), 4, data.keys.data(), data.values.data(), data.tokens,
                                         data.dim);
  KVCache cache(1, 1, 128, KVPolicy::parse("tq_prod:b=3|tq_mse:b=3"), 2);
  cache.append(0, data.keys.data(), data.values.data(), data.tokens);
  for (const Arithmetic arithmetic : {Arithmetic::kFloat, Arithmetic::kInteger}) {
    AttentionOptions whole;
    whole.threads = 1;
    whole.tokens_per_task = 1 << 20;
    whole.arithmetic = arithmetic;
    const auto reference = decode_attention(cache, 0, 0, data.query_rows.data(), 4, whole);
    const double codec_error = relative_difference(reference.output, exact.output);
    const double tolerance = arithmetic == Arithmetic::kFloat ? 1e-5 : 0.1 * codec_error;
    for (int threads : {1, 2}) {
      AttentionOptions split = whole;
      split.threads = threads;
      split.tokens_per_task = 700;
      const auto got = decode_attention(cache, 0, 0, data.query_rows.data(), 4, split);
      EXPECT_LT(relative_difference(got.output, reference.output), tolerance);
      for (size_t h = 0; h < 4; ++h) EXPECT_NEAR(got.lse[h], reference.lse[h], 1e-4);
    }
  }
}

// The default split: a body that fits one range of tokens_per_task is cut in two (so that two
// threads share it), the same ranges on one thread as on two, hence the same bits.
TEST(Attention, DefaultRangesSplitAShortBodyInTwoOnAnyThreadCount) {
  const auto data = synthetic("long-tailed", 5132, 4);
  KVCache cache(1, 1, 128, KVPolicy::parse("tq_mse:b=3"), 2);
  cache.append(0, data.keys.data(), data.values.data(), data.tokens);
  const size_t body = cache.head(0, 0).body_count();  // about 5000: within one default range
  ASSERT_GT(body, 4096u);
  ASSERT_LT(body, AttentionOptions{}.tokens_per_task);
  AttentionOptions halves;
  halves.threads = 1;
  halves.tokens_per_task = (body + 1) / 2;
  const auto expected = decode_attention(cache, 0, 0, data.query_rows.data(), 4, halves);
  AttentionOptions thirds = halves;
  thirds.tokens_per_task = 1700;
  const auto other = decode_attention(cache, 0, 0, data.query_rows.data(), 4, thirds);
  EXPECT_NE(other.output, expected.output) << "another split should round differently";
  for (int threads : {1, 2, 64}) {  // 64: more threads than tasks
    AttentionOptions defaults;
    defaults.threads = threads;
    const auto got = decode_attention(cache, 0, 0, data.query_rows.data(), 4, defaults);
    EXPECT_EQ(got.output, expected.output) << threads << " threads";
    EXPECT_EQ(got.lse, expected.lse) << threads << " threads";
  }
}

// A parallel loop wakes no more threads than it has tasks, and at least one.
TEST(Attention, TeamSizeNeverExceedsTheTasks) {
  EXPECT_EQ(team_size(16, 5), 5);
  EXPECT_EQ(team_size(2, 5), 2);
  EXPECT_EQ(team_size(3, 0), 1);
  EXPECT_EQ(team_size(0, 1u << 20), omp_get_max_threads());
  EXPECT_EQ(team_size(0, 1), 1);
}

// The integer kernels (the default) against the float ones: both near the exact answer, within
// a small fraction of the codec's own error of each other; the same bits for every thread count,
// and (the body's sums being exact integers) within float rounding across instruction sets.
TEST(Attention, IntegerKernelsMatchFloatKernelsAndEveryTarget) {
  const auto data = synthetic("long-tailed", 6000, 4);
  const auto exact = reference_attention(data.query_rows.data(), 4, data.keys.data(), data.values.data(), data.tokens,
                                         data.dim);
  // Where there is one (AVX3_DL without AMX), every policy here runs the fused kernel: TurboQuant
  // mse and prod keys, the outlier split of either, centred keys and values, q4_0's channel groups.
  for (const std::string policy :
       {"tq_mse:b=3", "q4_0", "tq_mse:b=2.5", "tq_mse:b=2.5|center:tq_mse:b=2.5,rescale=1", "tq_prod:b=3|tq_mse:b=4",
        "center:tq_prod:b=3|center:tq_mse:b=3,rescale=1", "tq_prod:b=3.5|center:tq_mse:b=3.5,rescale=1"}) {
    SCOPED_TRACE(policy);
    KVCache cache(1, 1, 128, KVPolicy::parse(policy), 2);
    cache.append(0, data.keys.data(), data.values.data(), data.tokens);
    AttentionOptions options;
    options.tokens_per_task = 1000;
    options.arithmetic = Arithmetic::kFloat;
    const auto floats = decode_attention(cache, 0, 0, data.query_rows.data(), 4, options);
    options.arithmetic = Arithmetic::kInteger;
    const auto integers = decode_attention(cache, 0, 0, data.query_rows.data(), 4, options);
    const double codec_error = relative_difference(floats.output, exact.output);
    std::printf("%s: codec error %.4f, integer vs float kernels %.5f\n", policy.c_str(), codec_error,
                relative_difference(integers.output, floats.output));
    EXPECT_LT(relative_difference(integers.output, floats.output), 0.1 * codec_error);
    EXPECT_GT(relative_difference(integers.output, floats.output), 0.0) << "the integer path should be in use";
    testutil::for_each_target([&] {
      options.threads = 1;
      const auto one = decode_attention(cache, 0, 0, data.query_rows.data(), 4, options);
      options.threads = 2;
      const auto two = decode_attention(cache, 0, 0, data.query_rows.data(), 4, options);
      EXPECT_EQ(one.output, two.output);
      EXPECT_EQ(one.lse, two.lse);
      EXPECT_LT(relative_difference(one.output, integers.output), 1e-5);
    });
  }
}

TEST(Attention, MergingTwoHalvesGivesTheWhole) {
  const size_t dim = 32, n = 400;
  const auto keys = testutil::gaussian_matrix(n, dim, 4);
  const auto values = testutil::gaussian_matrix(n, dim, 5);
  const auto queries = testutil::gaussian_matrix(2, dim, 6);
  auto first = reference_attention(queries.data(), 2, keys.data(), values.data(), 150, dim);
  const auto second = reference_attention(queries.data(), 2, keys.data() + 150 * dim, values.data() + 150 * dim, 250, dim);
  const auto whole = reference_attention(queries.data(), 2, keys.data(), values.data(), n, dim);
  merge_attention(first, second);
  EXPECT_LT(relative_difference(first.output, whole.output), 1e-6);
  EXPECT_NEAR(first.lse[1], whole.lse[1], 1e-5);
}

TEST(Attention, MergedStatesAreTheSameBitsInAnyBuffer) {
  const size_t dim = 16, n = 300;
  const auto keys = testutil::gaussian_matrix(n, dim, 14);
  const auto values = testutil::gaussian_matrix(n, dim, 15);
  const auto queries = testutil::gaussian_matrix(3, dim, 16);
  const auto a = reference_attention(queries.data(), 3, keys.data(), values.data(), 100, dim);
  auto b = reference_attention(queries.data(), 3, keys.data() + 100 * dim, values.data() + 100 * dim, n - 100, dim);
  const auto whole = reference_attention(queries.data(), 3, keys.data(), values.data(), n, dim);
  // Head 1 of b holds no tokens, head 2 of neither.
  const float none = -std::numeric_limits<float>::infinity();
  auto a_heads = a;
  std::fill(b.output.begin() + dim, b.output.begin() + 3 * dim, 0.0f);
  b.lse[1] = b.lse[2] = none;
  std::fill(a_heads.output.begin() + 2 * dim, a_heads.output.end(), 0.0f);
  a_heads.lse[2] = none;
  std::vector<float> out(3 * dim), lse(3);
  merge_attention_states(a_heads.output.data(), a_heads.lse.data(), b.output.data(), b.lse.data(), 3, dim, out.data(),
                         lse.data());
  EXPECT_LT(relative_difference(std::vector<float>(out.begin(), out.begin() + dim),
                                std::vector<float>(whole.output.begin(), whole.output.begin() + dim)),
            1e-6);
  EXPECT_EQ(std::vector<float>(out.begin() + dim, out.begin() + 2 * dim),
            std::vector<float>(a.output.begin() + dim, a.output.begin() + 2 * dim));  // b empty: a exactly
  EXPECT_EQ(lse[1], a.lse[1]);
  EXPECT_EQ(std::vector<float>(out.begin() + 2 * dim, out.end()), std::vector<float>(dim, 0.0f));
  EXPECT_EQ(lse[2], none);
  // Into a's buffers and into b's: the same bits.
  auto into_a = a_heads, into_b = b;
  merge_attention_states(into_a.output.data(), into_a.lse.data(), b.output.data(), b.lse.data(), 3, dim,
                         into_a.output.data(), into_a.lse.data());
  merge_attention_states(a_heads.output.data(), a_heads.lse.data(), into_b.output.data(), into_b.lse.data(), 3, dim,
                         into_b.output.data(), into_b.lse.data());
  EXPECT_EQ(into_a.output, out);
  EXPECT_EQ(into_b.output, out);
  EXPECT_EQ(into_a.lse, lse);
  EXPECT_EQ(into_b.lse, lse);
}

TEST(Attention, GroupedQueryHeadsReadTheirKvHead) {
  const size_t kv_heads = 2, group = 3, dim = 64, n = 500;
  const auto keys = testutil::gaussian_matrix(kv_heads * n, dim, 7);
  const auto values = testutil::gaussian_matrix(kv_heads * n, dim, 8);
  const auto queries = testutil::gaussian_matrix(kv_heads * group, dim, 9);
  KVCache cache(1, kv_heads, dim, KVPolicy::parse("tq_mse:b=4"), 3);
  cache.append(0, keys.data(), values.data(), n);
  const auto layer = decode_attention_layer(cache, 0, queries.data(), kv_heads * group);
  for (size_t g = 0; g < kv_heads; ++g) {
    const auto one = decode_attention(cache, 0, g, queries.data() + g * group * dim, group);
    for (size_t i = 0; i < group * dim; ++i) EXPECT_NEAR(layer.output[g * group * dim + i], one.output[i], 1e-6);
  }
  EXPECT_THROW(decode_attention_layer(cache, 0, queries.data(), 5), Error);
}

// A layer's step runs every KV head's ranges in one parallel loop; each group's answer keeps the bits
// of decode_attention on its own, on any number of threads (MQA and GQA).
TEST(Attention, LayerStepHasEachGroupsBitsOnAnyThreadCount) {
  const size_t dim = 128, n = 5000, group = 4;
  const auto data = synthetic("long-tailed", n, 2 * group);
  for (const size_t kv_heads : {1u, 2u}) {
    KVCache cache(1, kv_heads, dim, KVPolicy::parse("tq_prod:b=3|tq_mse:b=3"), 5);
    std::vector<float> keys(n * kv_heads * dim), values(n * kv_heads * dim);
    for (size_t i = 0; i < n; ++i)
      for (size_t g = 0; g < kv_heads; ++g)
        for (size_t j = 0; j < dim; ++j) {  // head g: the data's channels rotated by g
          keys[(i * kv_heads + g) * dim + j] = data.keys[i * dim + (j + g) % dim];
          values[(i * kv_heads + g) * dim + j] = data.values[i * dim + (j + g) % dim];
        }
    cache.append(0, keys.data(), values.data(), n);
    const size_t q_heads = kv_heads * group;
    AttentionOptions one;
    one.threads = 1;
    std::vector<AttentionResult> groups;
    for (size_t g = 0; g < kv_heads; ++g)
      groups.push_back(decode_attention(cache, 0, g, data.query_rows.data() + g * group * dim, group, one));
    const AttentionResult expected = concat_attention(groups);
    for (int threads : {1, 2, 3, 64}) {
      AttentionOptions options;
      options.threads = threads;
      const auto got = decode_attention_layer(cache, 0, data.query_rows.data(), q_heads, options);
      EXPECT_EQ(got.output, expected.output) << kv_heads << " kv heads, " << threads << " threads";
      EXPECT_EQ(got.lse, expected.lse) << kv_heads << " kv heads, " << threads << " threads";
    }
  }
}

TEST(Attention, BadQueriesAreRefused) {
  KVCache cache(1, 1, 16, KVPolicy::parse("fp16"), 1);
  std::vector<float> q(32, 0.1f);
  q[16 + 3] = NAN;
  try {
    decode_attention(cache, 0, 0, q.data(), 2);
    FAIL() << "NaN query accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 1 column 3 is NaN"), std::string::npos) << e.what();
  }
  EXPECT_THROW(decode_attention(cache, 1, 0, q.data(), 1), Error);
  EXPECT_THROW(decode_attention(cache, 0, 1, q.data(), 1), Error);
  AttentionOptions negative;
  negative.threads = -3;  // was taken as "all threads"
  EXPECT_NE(testutil::error_of([&] { decode_attention(cache, 0, 0, q.data(), 1, negative); })
                .find("threads must be in 0..1024"),
            std::string::npos);
  AttentionOptions too_many;
  too_many.threads = 100000;  // crashed the OpenMP runtime
  EXPECT_NE(testutil::error_of([&] { decode_attention(cache, 0, 0, q.data(), 1, too_many); })
                .find("threads must be in 0..1024"),
            std::string::npos);
  // Finite, but its squares overflow: the scores and softmax would be NaN.
  std::vector<float> huge(16, 1e20f);
  EXPECT_NE(testutil::error_of([&] { decode_attention(cache, 0, 0, huge.data(), 1); })
                .find("row 0 has a norm beyond the float range"),
            std::string::npos);
  const auto empty = decode_attention(cache, 0, 0, q.data(), 1);
  EXPECT_TRUE(std::isinf(empty.lse[0]) && empty.lse[0] < 0);
}

TEST(Attention, ErrorFallsAsBitsRise) {
  for (const std::string regime : {"peaked", "flat"}) {
    const auto data = synthetic(regime, 3000, 8);
    double previous = 1e9;
    for (int bits : {2, 3, 4}) {
      const auto row = evaluate_policy(fmt::format("tq_mse:b={}", bits), data, 1, 1);
      EXPECT_LT(row.rel_error, previous) << regime << " b=" << bits;
      previous = row.rel_error;
    }
    EXPECT_LT(evaluate_policy("int8", data, 1, 1).rel_error, previous) << regime;
  }
}

TEST(Attention, ProdKeysAreUnbiasedMseKeysAreNot) {
  // Queries along the keys' common offset give scores with a large mean, which the mse keys
  // shrink by their (1 - mse)-like factor; the prod keys' error averages out.
  const auto data = synthetic("long-tailed", 4000, 64, 3);
  AttentionCase shifted = data;
  for (size_t q = 0; q < shifted.queries; ++q)
    for (size_t j = 0; j < shifted.dim; ++j) {
      double mean = 0;
      for (size_t t = 0; t < shifted.tokens; ++t) mean += shifted.keys[t * shifted.dim + j];
      shifted.query_rows[q * shifted.dim + j] += static_cast<float>(0.3 * mean / static_cast<double>(shifted.tokens));
    }
  const auto prod = evaluate_policy("tq_prod:b=2|fp16", shifted, 1, 1);
  const auto mse = evaluate_policy("tq_mse:b=2|fp16", shifted, 1, 1);
  EXPECT_LT(std::abs(prod.score_error_mean), 4 * prod.score_error_stderr_queries) << prod.score_error_mean << " ± " << prod.score_error_stderr_queries;
  EXPECT_GT(std::abs(mse.score_error_mean), 4 * mse.score_error_stderr_queries) << mse.score_error_mean << " ± " << mse.score_error_stderr_queries;
}

}  // namespace
}  // namespace kvsketch
