// PagedSelectionCache: per-sequence selectors over a PagedKVCache. One sequence without rollback
// answers as SelectionCache; a batch as its sequences alone; fork copies the selectors; truncate
// never finds a token it takes back inside a selector.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kvsketch/paged_selection_cache.hpp"
#include "kvsketch/selection_cache.hpp"
#include "test_util.hpp"

namespace kvsketch {
namespace {

constexpr size_t kLayers = 2, kKvHeads = 2, kDim = 64, kQueryHeads = 4;

// Tokens of a stream, [kv_heads][tokens][dim] per slice: token t is the same whatever cuts it.
struct Stream {
  std::vector<float> keys, values;
  size_t total;
  Stream(size_t total_, uint64_t seed) : total(total_) {
    keys = testutil::gaussian_matrix(kKvHeads * total, kDim, seed);
    values = testutil::gaussian_matrix(kKvHeads * total, kDim, seed + 1);
    for (size_t i = 0; i < kKvHeads * total; ++i) keys[i * kDim + 3] *= 4.0f;  // a loud channel
  }
  std::vector<float> slice(const std::vector<float>& x, size_t first, size_t n) const {
    std::vector<float> out;
    for (size_t h = 0; h < kKvHeads; ++h)
      out.insert(out.end(), x.begin() + static_cast<std::ptrdiff_t>((h * total + first) * kDim),
                 x.begin() + static_cast<std::ptrdiff_t>((h * total + first + n) * kDim));
    return out;
  }
};

// Appends tokens [first, last) of a stream to every layer, in chunks of `chunk`.
template <typename Cache>
void feed(Cache& cache, SequenceId id, const Stream& stream, size_t first, size_t last, size_t chunk) {
  for (size_t t = first; t < last; t += chunk) {
    const size_t n = std::min(chunk, last - t);
    const auto k = stream.slice(stream.keys, t, n), v = stream.slice(stream.values, t, n);
    for (size_t layer = 0; layer < kLayers; ++layer) cache.append(id, layer, k.data(), v.data(), n);
  }
}

struct Step {
  std::vector<float> output, lse;
};

Step attend(const PagedSelectionCache& cache, size_t layer, const std::vector<SequenceId>& ids,
            const std::vector<float>& queries, uint64_t draw = 0) {
  Step step{std::vector<float>(ids.size() * kQueryHeads * kDim), std::vector<float>(ids.size() * kQueryHeads)};
  cache.attention(layer, ids.data(), ids.size(), queries.data(), kQueryHeads, step.output.data(), step.lse.data(),
                  draw);
  return step;
}

void expect_same_bits(const Step& a, const Step& b) {
  ASSERT_EQ(a.output.size(), b.output.size());
  for (size_t i = 0; i < a.output.size(); ++i) ASSERT_EQ(a.output[i], b.output[i]) << "output " << i;
  for (size_t i = 0; i < a.lse.size(); ++i) ASSERT_EQ(a.lse[i], b.lse[i]) << "lse " << i;
}

const char* const kSelectors[] = {"magicpig:K=6,L=40", "topk:budget=0.1", "uniform:budget=0.2", "balancekv"};

TEST(PagedSelectionCache, OneSequenceWithoutRollbackAnswersAsSelectionCache) {
  const Stream stream(700, 5);
  const auto queries = testutil::gaussian_matrix(kQueryHeads, kDim, 9);
  for (const char* spec : {"tq_prod:b=3|tq_mse:b=3|sinks=4|window=32|block=16|page=64", "fp16|block=16|page=32"})
    for (const char* selector : kSelectors) {
      SCOPED_TRACE(std::string(spec) + " " + selector);
      const KVPolicy policy = KVPolicy::parse(spec);
      PagedSelectionCache paged(kLayers, kKvHeads, kDim, policy, selector, {1}, 3);
      SelectionCache single(kLayers, kKvHeads, kDim, policy, selector, {1}, 3);
      const SequenceId id = paged.add_sequence();
      // Uneven chunks on one side, one token at a time after a prefill on the other.
      feed(paged, id, stream, 0, 700, 37);
      for (size_t t = 0; t < 700; t += t < 600 ? 600 : 1) {
        const size_t n = t < 600 ? 600 : 1;
        const auto k = stream.slice(stream.keys, t, n), v = stream.slice(stream.values, t, n);
        for (size_t layer = 0; layer < kLayers; ++layer) single.append(layer, k.data(), v.data(), n);
      }
      EXPECT_EQ(paged.indexed_tokens(id, 0), single.selector(0, 0).tokens());
      EXPECT_GT(paged.indexed_tokens(id, 0), 500u);
      for (uint64_t draw : {0, 7}) {
        const Step got = attend(paged, 0, {id}, queries, draw);
        const AttentionResult want = single.attention(0, queries.data(), kQueryHeads, draw);
        for (size_t i = 0; i < want.output.size(); ++i)
          ASSERT_EQ(got.output[i], want.output[i]) << i;
        for (size_t i = 0; i < want.lse.size(); ++i) ASSERT_EQ(got.lse[i], want.lse[i]) << i;
      }
      // The dense layer is the paged cache's own decode.
      std::vector<float> output(kQueryHeads * kDim), lse(kQueryHeads);
      paged.cache().decode(1, &id, 1, queries.data(), kQueryHeads, output.data(), lse.data());
      expect_same_bits(attend(paged, 1, {id}, queries), Step{output, lse});
      EXPECT_EQ(paged.index_bytes(), single.index_bytes());
    }
}

TEST(PagedSelectionCache, BatchIsItsSequencesAloneAndForkCopiesTheSelectors) {
  const Stream prefix(400, 11), left(300, 12), right(300, 13);
  const KVPolicy policy = KVPolicy::parse("tq_mse:b=3|sinks=4|window=32|block=16|page=64|rollback=24");
  for (const char* selector : kSelectors) {
    SCOPED_TRACE(selector);
    PagedSelectionCache forked(kLayers, kKvHeads, kDim, policy, selector, {}, 4);
    PagedSelectionCache fresh(kLayers, kKvHeads, kDim, policy, selector, {}, 4);
    const SequenceId a = forked.add_sequence();
    feed(forked, a, prefix, 0, 400, 50);
    const SequenceId b = forked.fork(a);
    feed(forked, a, left, 0, 300, 30);
    feed(forked, b, right, 0, 300, 30);
    const SequenceId fa = fresh.add_sequence(), fb = fresh.add_sequence();
    feed(fresh, fa, prefix, 0, 400, 50);
    feed(fresh, fa, left, 0, 300, 30);
    feed(fresh, fb, prefix, 0, 400, 50);
    feed(fresh, fb, right, 0, 300, 30);
    EXPECT_EQ(forked.index_bytes(), fresh.index_bytes());
    const auto queries = testutil::gaussian_matrix(3 * kQueryHeads, kDim, 21);
    const std::vector<float> q0(queries.begin(), queries.begin() + kQueryHeads * kDim);
    const std::vector<float> q1(queries.begin() + kQueryHeads * kDim, queries.begin() + 2 * kQueryHeads * kDim);
    const std::vector<float> q2(queries.begin() + 2 * kQueryHeads * kDim, queries.end());
    for (size_t layer = 0; layer < kLayers; ++layer) {
      const Step batch = attend(forked, layer, {a, b, a}, queries, 3);
      const Step alone_a = attend(fresh, layer, {fa}, q0, 3), alone_b = attend(fresh, layer, {fb}, q1, 3);
      const Step alone_a2 = attend(fresh, layer, {fa}, q2, 3);
      Step joined;
      for (const Step* s : {&alone_a, &alone_b, &alone_a2}) {
        joined.output.insert(joined.output.end(), s->output.begin(), s->output.end());
        joined.lse.insert(joined.lse.end(), s->lse.begin(), s->lse.end());
      }
      expect_same_bits(batch, joined);
    }
    // The fork's source goes on as before once the fork is gone.
    forked.remove_sequence(b);
    expect_same_bits(attend(forked, 0, {a}, q0, 1), attend(fresh, 0, {fa}, q0, 1));
  }
}

TEST(PagedSelectionCache, TruncateTakesBackNoIndexedToken) {
  const Stream stream(900, 31), other(60, 32);
  const KVPolicy policy = KVPolicy::parse("tq_mse:b=3|sinks=4|window=32|block=16|page=64|rollback=32");
  // With every token selected at weight 1, where the index ends does not change the answer.
  PagedSelectionCache cache(kLayers, kKvHeads, kDim, policy, "exact", {}, 2);
  PagedSelectionCache never(kLayers, kKvHeads, kDim, policy, "exact", {}, 2);
  PagedSelectionCache sampled(kLayers, kKvHeads, kDim, policy, "magicpig:K=6,L=40", {}, 2);
  const SequenceId id = cache.add_sequence(), n = never.add_sequence(), m = sampled.add_sequence();
  feed(cache, id, stream, 0, 900, 1);
  feed(never, n, stream, 0, 870, 1);
  feed(sampled, m, stream, 0, 900, 1);
  // 900 tokens: 864 encoded, the last 32 of them kept in fp16; 870 keeps 832 encoded.
  const size_t indexed_before = cache.indexed_tokens(id, 0);
  EXPECT_EQ(indexed_before, 832u);
  cache.truncate(id, 870);
  sampled.truncate(m, 870);
  // Nothing indexed was taken back: the index is within what the cache still holds encoded.
  EXPECT_EQ(cache.indexed_tokens(id, 0), indexed_before);
  EXPECT_LE(sampled.indexed_tokens(m, 0), 832u);
  EXPECT_EQ(cache.cache().tokens(id, 0), 870u);
  feed(cache, id, other, 0, 60, 7);
  feed(never, n, other, 0, 60, 7);
  feed(sampled, m, other, 0, 60, 7);
  const auto queries = testutil::gaussian_matrix(kQueryHeads, kDim, 33);
  const Step got = attend(cache, 0, {id}, queries), want = attend(never, 0, {n}, queries);
  for (size_t i = 0; i < got.output.size(); ++i)
    ASSERT_NEAR(got.output[i], want.output[i], 2e-5f * (1.0f + std::fabs(want.output[i]))) << i;
  // The sampled cache holds the same tokens as the exact ones: its pending rows and index add up.
  EXPECT_EQ(sampled.cache().tokens(m, 1), 930u);
  EXPECT_GE(sampled.indexed_tokens(m, 1), 930u - 4 - 32 - 32 - 16);
  const Step sampled_step = attend(sampled, 1, {m}, queries);
  for (const float x : sampled_step.output) ASSERT_TRUE(std::isfinite(x));
  // Truncating past what rollback keeps is refused, and changes nothing.
  const size_t indexed = sampled.indexed_tokens(m, 0);
  EXPECT_NE(testutil::error_of([&] { sampled.truncate(m, 100); }).find("truncate"), std::string::npos);
  EXPECT_EQ(sampled.cache().tokens(m, 0), 930u);
  EXPECT_EQ(sampled.indexed_tokens(m, 0), indexed);
}

TEST(PagedSelectionCache, BadCallsNameTheProblem) {
  const KVPolicy policy = KVPolicy::parse("tq_mse:b=3|window=16|block=16|page=32");
  PagedSelectionCache cache(kLayers, kKvHeads, kDim, policy, "topk:budget=0.1", {1}, 0);
  const SequenceId id = cache.add_sequence();
  const Stream stream(100, 41);
  feed(cache, id, stream, 0, 100, 100);
  const auto queries = testutil::gaussian_matrix(kQueryHeads, kDim, 42);
  std::vector<float> out(kQueryHeads * kDim);
  const auto error = [](const std::function<void()>& call) { return testutil::error_of(call); };
  const SequenceId missing = 77;
  EXPECT_NE(error([&] { cache.attention(0, &missing, 1, queries.data(), kQueryHeads, out.data(), nullptr); })
                .find("no sequence 77"),
            std::string::npos);
  EXPECT_NE(error([&] { cache.attention(5, &id, 1, queries.data(), kQueryHeads, out.data(), nullptr); }).find("layer 5"),
            std::string::npos);
  EXPECT_NE(error([&] { cache.attention(0, &id, 1, queries.data(), 3, out.data(), nullptr); }).find("multiple"),
            std::string::npos);
  EXPECT_NE(error([&] { cache.attention(0, &id, 1, queries.data(), kQueryHeads, nullptr, nullptr); }).find("null output"),
            std::string::npos);
  auto nan_queries = queries;
  nan_queries[3] = std::nanf("");
  EXPECT_NE(error([&] { cache.attention(0, &id, 1, nan_queries.data(), kQueryHeads, out.data(), nullptr); })
                .find("NaN"),
            std::string::npos);
  for (const auto& call : std::vector<std::function<void()>>{
           [&] { cache.fork(missing); }, [&] { cache.truncate(missing, 3); }, [&] { cache.remove_sequence(missing); },
           [&] { cache.append(missing, 0, stream.keys.data(), stream.values.data(), 1); },
           [&] { cache.selector(missing, 0, 0); }, [&] { cache.indexed_tokens(missing, 0); }})
    EXPECT_NE(error(call).find("no sequence 77"), std::string::npos);
  EXPECT_NE(error([&] { cache.selector(id, 1, 0); }).find("dense"), std::string::npos);
  EXPECT_NE(error([&] { cache.selector(id, 0, 9); }).find("out of range"), std::string::npos);
  // A refused append changes nothing.
  auto keys = stream.slice(stream.keys, 0, 10);
  const auto values = stream.slice(stream.values, 0, 10);
  keys[5] = std::nanf("");
  const size_t indexed = cache.indexed_tokens(id, 0), bytes = cache.cache().bytes();
  EXPECT_NE(error([&] { cache.append(id, 0, keys.data(), values.data(), 10); }).find("channel 5"), std::string::npos)
      << error([&] { cache.append(id, 0, keys.data(), values.data(), 10); });
  EXPECT_EQ(cache.indexed_tokens(id, 0), indexed);
  EXPECT_EQ(cache.cache().bytes(), bytes);
  EXPECT_EQ(cache.cache().tokens(id, 0), 100u);
  // Codecs whose rows the selection cannot read one by one, and bad selectors or dense layers.
  EXPECT_NE(error([&] { PagedSelectionCache(1, 1, kDim, KVPolicy::parse("kivi:b=2|block=32|page=64"), "exact"); })
                .find("single rows"),
            std::string::npos);
  EXPECT_NE(error([&] { PagedSelectionCache(1, 1, kDim, policy, "magicpig:K=0,L=4"); }).find("K"), std::string::npos);
  EXPECT_NE(error([&] { PagedSelectionCache(2, 1, kDim, policy, "exact", {2}); }).find("dense layer 2"),
            std::string::npos);
}

}  // namespace
}  // namespace kvsketch
