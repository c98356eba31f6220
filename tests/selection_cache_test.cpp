// SelectionCache: selectors over a KVCache's compressed body, sinks and window exact, dense layers.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <memory>
#include <set>
#include <string>

#include "cache/row_packing.hpp"
#include "kvsketch/selection_cache.hpp"
#include "kvsketch/eval/synthetic_cache.hpp"
#include "test_util.hpp"

using namespace kvsketch;

namespace {

constexpr size_t kDim = 128, kKvHeads = 2, kQueryHeads = 4, kTokens = 3000;

// [kv_heads][tokens][dim] keys and values of two hidden-state caches, and 4 query heads per step.
struct Layer {
  std::vector<float> keys, values, queries;  // queries: steps x kQueryHeads x kDim
};

Layer make_layer(uint64_t seed, size_t steps) {
  Layer layer;
  for (size_t h = 0; h < kKvHeads; ++h) {
    const SyntheticCache s =
        make_synthetic_cache("long-tailed", kTokens, kDim, steps * 2, seed + h, SyntheticModel::kHiddenState);
    layer.keys.insert(layer.keys.end(), s.keys.begin(), s.keys.end());
    layer.values.insert(layer.values.end(), s.values.begin(), s.values.end());
    // Query heads 2h and 2h + 1 read kv head h.
    for (size_t q = 0; q < steps * 2; ++q) layer.queries.insert(layer.queries.end(), s.query_rows.begin() + q * kDim, s.query_rows.begin() + (q + 1) * kDim);
  }
  // Reorder to steps x heads: query head (2h + g) of step t is row (h * 2 steps + 2 t + g).
  std::vector<float> ordered;
  for (size_t t = 0; t < steps; ++t)
    for (size_t h = 0; h < kKvHeads; ++h)
      for (size_t g = 0; g < 2; ++g) {
        const size_t row = h * 2 * steps + 2 * t + g;
        ordered.insert(ordered.end(), layer.queries.begin() + row * kDim, layer.queries.begin() + (row + 1) * kDim);
      }
  layer.queries = ordered;
  return layer;
}

// Rows [first, first + n) of every kv head, [kv_heads][n][dim].
std::vector<float> rows(const std::vector<float>& x, size_t first, size_t n) {
  std::vector<float> out;
  for (size_t h = 0; h < kKvHeads; ++h)
    out.insert(out.end(), x.begin() + (h * kTokens + first) * kDim, x.begin() + (h * kTokens + first + n) * kDim);
  return out;
}

}  // namespace

// A dense layer is the cache's decode attention; with every body token selected, so is a selected
// layer (up to the kernels' arithmetic).
TEST(SelectionCache, DenseLayersAndTheExactSelectorGiveDecodeAttention) {
  const KVPolicy policy = KVPolicy::parse("tq_prod:b=3|tq_mse:b=3");
  SelectionCache cache(2, kKvHeads, kDim, policy, "exact", {0}, 1);
  const Layer data = make_layer(1, 3);
  for (size_t layer = 0; layer < 2; ++layer) cache.append(layer, data.keys.data(), data.values.data(), kTokens);
  EXPECT_TRUE(cache.dense(0));
  EXPECT_NE(testutil::error_of([&] { cache.selector(0, 0); }).find("dense"), std::string::npos);
  EXPECT_EQ(cache.selector(1, 1).tokens(), cache.cache().head(1, 1).body_count());
  for (size_t t = 0; t < 3; ++t) {
    const float* queries = data.queries.data() + t * kQueryHeads * kDim;
    const AttentionResult dense = cache.attention(0, queries, kQueryHeads, t);
    const AttentionResult direct = decode_attention_layer(cache.cache(), 0, queries, kQueryHeads);
    EXPECT_EQ(dense.output, direct.output);
    AttentionOptions options;
    options.arithmetic = Arithmetic::kFloat;
    const AttentionResult selected = cache.attention(1, queries, kQueryHeads, t);
    const AttentionResult reference = decode_attention_layer(cache.cache(), 1, queries, kQueryHeads, options);
    for (size_t q = 0; q < kQueryHeads; ++q) {
      EXPECT_NEAR(selected.lse[q], reference.lse[q], 1e-4f);
      const double scale = testutil::norm(reference.output.data() + q * kDim, kDim);
      for (size_t j = 0; j < kDim; ++j)
        EXPECT_NEAR(selected.output[q * kDim + j], reference.output[q * kDim + j], 1e-5 * scale);
    }
  }
}

// The selection reads scattered rows: the automatic packing keeps them plain; rows packed in quads
// on request are copied out of them and give the same bits.
TEST(SelectionCache, ScatteredRowsPlainByDefaultAndTheSameInQuads) {
  const Layer data = make_layer(2, 2);
  std::vector<std::unique_ptr<SelectionCache>> caches;
  for (const RowPacking packing : {RowPacking::kAuto, RowPacking::kQuads}) {
    const ScopedRowPacking scope(packing);
    caches.push_back(std::make_unique<SelectionCache>(1, kKvHeads, kDim, KVPolicy::parse("tq_prod:b=3|tq_mse:b=3"),
                                                      "magicpig:K=8,L=75", std::set<size_t>{}, 4));
    caches.back()->append(0, data.keys.data(), data.values.data(), kTokens);
  }
  EXPECT_EQ(current_row_packing(), RowPacking::kAuto);
  EXPECT_FALSE(rows_in_quads(caches[0]->cache().key_codec(0, 1)));
  EXPECT_FALSE(rows_in_quads(caches[0]->cache().value_codec(0, 1)));
  EXPECT_TRUE(rows_in_quads(caches[1]->cache().value_codec(0, 1)));
  for (size_t t = 0; t < 2; ++t) {
    const float* queries = data.queries.data() + t * kQueryHeads * kDim;
    const AttentionResult plain = caches[0]->attention(0, queries, kQueryHeads, t);
    const AttentionResult quads = caches[1]->attention(0, queries, kQueryHeads, t);
    EXPECT_EQ(quads.output, plain.output);
    EXPECT_EQ(quads.lse, plain.lse);
  }
}

// MagicPIG over a TurboQuant body: token by token builds the index one prefill builds, a step is the
// same bits on one thread and on all, and far closer to exact attention than the sinks and window
// alone.
TEST(SelectionCache, MagicPigStreamsLikeAPrefillOnAnyThreadCount) {
  const KVPolicy policy = KVPolicy::parse("tq_mse:b=4|tq_mse:b=4");
  const std::string selector = "magicpig:K=8,L=75";
  const size_t steps = 6;
  const Layer data = make_layer(5, steps);
  SelectionCache prefilled(1, kKvHeads, kDim, policy, selector, {}, 2), streamed(1, kKvHeads, kDim, policy, selector, {}, 2);
  SelectionCache window_only(1, kKvHeads, kDim, policy, "window", {}, 2);
  prefilled.append(0, rows(data.keys, 0, kTokens - 100).data(), rows(data.values, 0, kTokens - 100).data(), kTokens - 100);
  window_only.append(0, data.keys.data(), data.values.data(), kTokens);
  for (size_t t = 0; t < kTokens; ++t) {
    if (t >= kTokens - 100) prefilled.append(0, rows(data.keys, t, 1).data(), rows(data.values, t, 1).data(), 1);
    streamed.append(0, rows(data.keys, t, 1).data(), rows(data.values, t, 1).data(), 1);
  }
  EXPECT_EQ(prefilled.index_bytes(), streamed.index_bytes());
  const int threads = omp_get_max_threads();
  double sampled_error = 0, window_error = 0;
  auto relative_error = [&](const AttentionResult& r, size_t q, const AttentionResult& exact) {
    double error = 0, norm = 0;
    for (size_t j = 0; j < kDim; ++j) {
      error += std::pow(r.output[q * kDim + j] - exact.output[j], 2);
      norm += std::pow(exact.output[j], 2);
    }
    return std::sqrt(error / norm);
  };
  for (size_t t = 0; t < steps; ++t) {
    const float* queries = data.queries.data() + t * kQueryHeads * kDim;
    const AttentionResult a = prefilled.attention(0, queries, kQueryHeads, t);
    omp_set_num_threads(1);
    const AttentionResult b = streamed.attention(0, queries, kQueryHeads, t);
    omp_set_num_threads(threads);
    EXPECT_EQ(a.output, b.output);
    EXPECT_EQ(a.lse, b.lse);
    const AttentionResult w = window_only.attention(0, queries, kQueryHeads, t);
    for (size_t q = 0; q < kQueryHeads; ++q) {
      const size_t kv = q / 2;
      const AttentionResult exact = reference_attention(queries + q * kDim, 1, data.keys.data() + kv * kTokens * kDim,
                                                        data.values.data() + kv * kTokens * kDim, kTokens, kDim);
      sampled_error += relative_error(a, q, exact);
      window_error += relative_error(w, q, exact);
    }
  }
  EXPECT_LT(sampled_error, 0.6 * window_error) << sampled_error / (steps * kQueryHeads);
}

TEST(SelectionCache, BadInputIsRefusedAndChangesNothing) {
  const KVPolicy policy = KVPolicy::parse("tq_mse:b=3");
  EXPECT_NE(testutil::error_of([&] { SelectionCache(2, 1, kDim, policy, "magicpig:K=10,L=150", {2}); }).find("dense layer 2"),
            std::string::npos);
  EXPECT_NE(testutil::error_of([&] { SelectionCache(2, 1, kDim, policy, "lsh"); }).find("unknown selector"),
            std::string::npos);
  // KIVI keys share scales over groups of 32 tokens: a selection cannot read them one by one.
  EXPECT_NE(testutil::error_of([&] {
              SelectionCache(1, 1, kDim, KVPolicy::parse("kivi_k:b=2|kivi_v:b=2"), "magicpig:K=8,L=20");
            }).find("groups of 32"),
            std::string::npos);
  SelectionCache cache(1, kKvHeads, kDim, policy, "magicpig:K=8,L=20", {}, 1);
  const Layer data = make_layer(9, 1);
  cache.append(0, rows(data.keys, 0, 500).data(), rows(data.values, 0, 500).data(), 500);
  const size_t indexed = cache.selector(0, 0).tokens();
  std::vector<float> bad = rows(data.keys, 500, 300);
  bad[7 * kDim + 3] = NAN;
  EXPECT_NE(testutil::error_of([&] { cache.append(0, bad.data(), rows(data.values, 500, 300).data(), 300); }).find("token 7 (position 507), channel 3 is nan"),
            std::string::npos);
  EXPECT_EQ(cache.selector(0, 0).tokens(), indexed);
  EXPECT_EQ(cache.cache().tokens(0), 500u);
  EXPECT_NE(testutil::error_of([&] { cache.append(1, bad.data(), bad.data(), 1); }).find("layer 1 is out of range"),
            std::string::npos);
  EXPECT_NE(testutil::error_of([&] { cache.attention(0, data.queries.data(), 3); }).find("multiple"), std::string::npos);
  std::vector<float> query(kQueryHeads * kDim, 1.0f);
  query[5] = INFINITY;
  EXPECT_NE(testutil::error_of([&] { cache.attention(0, query.data(), kQueryHeads); }).find("Inf"), std::string::npos);
}
