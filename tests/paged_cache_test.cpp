// PagedKVCache: one sequence holds what a KVCache holds; fork shares sealed pages and then behaves
// as an independent copy; truncate + append equals never having appended; a batch decode equals
// its sequences decoded alone, bit for bit, on any executor.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>

#include "kvsketch/attention.hpp"
#include "kvsketch/calibration.hpp"
#include "cache/paged_pages.hpp"
#include "core/require.hpp"
#include "kvsketch/half.hpp"
#include "kvsketch/kv_cache.hpp"
#include "kvsketch/paged_cache.hpp"
#include "allocation_counter.hpp"
#include "test_util.hpp"

namespace kvsketch {
namespace {

constexpr size_t kHeads = 2, kDim = 64;

// A stream of tokens, [kv_heads][tokens][dim] per call, drawn from one seed: token t of a stream
// is the same whatever calls cut it.
struct TokenStream {
  std::vector<float> keys, values;
  size_t total;
  TokenStream(size_t total_, uint64_t seed) : total(total_) {
    keys = testutil::gaussian_matrix(kHeads * total, kDim, seed);
    values = testutil::gaussian_matrix(kHeads * total, kDim, seed + 1000);
    // A loud channel, so that outlier-fitted codecs have something to find.
    for (size_t i = 0; i < kHeads * total; ++i) keys[i * kDim + 5] *= 6.0f;
  }
  // Tokens [first, first + count) of every head.
  std::pair<std::vector<float>, std::vector<float>> slice(size_t first, size_t count) const {
    std::pair<std::vector<float>, std::vector<float>> out;
    for (size_t h = 0; h < kHeads; ++h)
      for (const bool k : {true, false}) {
        const auto& from = k ? keys : values;
        auto& to = k ? out.first : out.second;
        to.insert(to.end(), from.begin() + static_cast<std::ptrdiff_t>((h * total + first) * kDim),
                  from.begin() + static_cast<std::ptrdiff_t>((h * total + first + count) * kDim));
      }
    return out;
  }
};

// Appends tokens [first, first + count) of `stream` to every layer of a sequence in uneven chunks.
void feed(PagedKVCache& cache, SequenceId id, const TokenStream& stream, size_t first, size_t count) {
  static constexpr size_t kChunks[] = {1, 7, 64, 3, 130, 33};
  for (size_t done = 0, c = 0; done < count; ++c) {
    const size_t n = std::min(kChunks[c % std::size(kChunks)], count - done);
    const auto kv_pair = stream.slice(first + done, n);
    const auto& k = kv_pair.first;
    const auto& v = kv_pair.second;
    for (size_t layer = 0; layer < cache.layers(); ++layer) cache.append(id, layer, k.data(), v.data(), n);
    done += n;
  }
}

struct Decoded {
  std::vector<float> output, lse;
  bool operator==(const Decoded& o) const {
    return output.size() == o.output.size() && lse.size() == o.lse.size() &&
           std::memcmp(output.data(), o.output.data(), output.size() * sizeof(float)) == 0 &&
           std::memcmp(lse.data(), o.lse.data(), lse.size() * sizeof(float)) == 0;
  }
};

Decoded decode(const PagedKVCache& cache, size_t layer, const std::vector<SequenceId>& ids, const float* queries,
               size_t q_heads, const AttentionOptions& options = {}) {
  Decoded d{std::vector<float>(ids.size() * q_heads * kDim), std::vector<float>(ids.size() * q_heads)};
  cache.decode(layer, ids.data(), ids.size(), queries, q_heads, d.output.data(), d.lse.data(), options);
  return d;
}

// Exact attention in fp32 of `group` query heads per KV head over every token of `stream` (as fp16
// holds them): [kv_heads][group][dim].
std::vector<float> exact_output(const TokenStream& stream, const std::vector<float>& queries, size_t group) {
  std::vector<float> out;
  for (size_t h = 0; h < kHeads; ++h) {
    auto kv_pair = stream.slice(0, stream.total);
    auto& k = kv_pair.first;
    auto& v = kv_pair.second;
    for (auto* x : {&k, &v})
      for (float& value : *x) value = half_to_float(float_to_half(value));
    const AttentionResult r = reference_attention(queries.data() + h * group * kDim, group,
                                                  k.data() + h * stream.total * kDim,
                                                  v.data() + h * stream.total * kDim, stream.total, kDim);
    out.insert(out.end(), r.output.begin(), r.output.end());
  }
  return out;
}

const char* const kPolicies[] = {
    "tq_prod:b=3|tq_mse:b=3|window=64|block=16|page=64",
    "tq_mse:b=2.5|center:tq_mse:b=2.5,rescale=1|window=40|block=8|page=48|sinks=2",
    "qjl:m=128,outliers=8|tq_mse:b=3,rescale=1|window=32|block=16|page=32|layer1=int8",
    "kivi:b=2|window=16|block=32|page=64",
    "rotate:q4_0|rotate:kivi_v:b=4|window=24|block=8|page=32",
};

TEST(PagedKVCache, OneSequenceHoldsWhatAKVCacheHolds) {
  const TokenStream stream(700, 1);
  const auto queries = testutil::gaussian_matrix(4 * kHeads, kDim, 2);
  for (const char* spec : kPolicies) {
    SCOPED_TRACE(spec);
    KVPolicy policy = KVPolicy::parse(spec);
    KVCache reference(2, kHeads, kDim, policy, 5);
    const auto kv_pair = stream.slice(0, stream.total);
    const auto& k = kv_pair.first;
    const auto& v = kv_pair.second;
    for (size_t layer = 0; layer < 2; ++layer) reference.append(layer, k.data(), v.data(), stream.total);
    for (const size_t page : {policy.page, size_t{1024}}) {
      policy.page = page;
      PagedKVCache cache(2, kHeads, kDim, policy, 5);
      const SequenceId id = cache.add_sequence();
      feed(cache, id, stream, 0, stream.total);
      EXPECT_EQ(cache.tokens(id, 1), reference.tokens(1));
      EXPECT_EQ(cache.bytes(), reference.bytes());
      for (size_t layer = 0; layer < 2; ++layer) {
        const AttentionResult want = decode_attention_layer(reference, layer, queries.data(), 4 * kHeads);
        const Decoded got = decode(cache, layer, {id}, queries.data(), 4 * kHeads);
        if (page >= stream.total) {  // one page: the very ranges KVCache reads, so the same bits
          EXPECT_EQ(0, std::memcmp(got.output.data(), want.output.data(), want.output.size() * sizeof(float)));
          EXPECT_EQ(got.lse, want.lse);
        } else {
          // Pages cut the body elsewhere: in float arithmetic only the merge's rounding differs. The
          // integer kernels also round the weights to bytes per block of rows, which the cut moves:
          // there the two differ by a fraction of their own error against exact attention.
          AttentionOptions float_options;
          float_options.arithmetic = Arithmetic::kFloat;
          const AttentionResult w = decode_attention_layer(reference, layer, queries.data(), 4 * kHeads, float_options);
          const Decoded g = decode(cache, layer, {id}, queries.data(), 4 * kHeads, float_options);
          for (size_t i = 0; i < w.output.size(); ++i) ASSERT_NEAR(g.output[i], w.output[i], 2e-5f);
          for (size_t i = 0; i < w.lse.size(); ++i) ASSERT_NEAR(g.lse[i], w.lse[i], 2e-5f);
          const std::vector<float> exact = exact_output(stream, queries, 4);
          double kv_error = 0, paged_error = 0, between = 0;
          for (size_t i = 0; i < want.output.size(); ++i) {
            kv_error += std::pow(want.output[i] - exact[i], 2);
            paged_error += std::pow(got.output[i] - exact[i], 2);
            between += std::pow(got.output[i] - want.output[i], 2);
          }
          EXPECT_LT(paged_error, 1.2 * kv_error);
          EXPECT_LT(between, 0.1 * kv_error);
        }
      }
    }
  }
}

TEST(PagedKVCache, AllocationStaysNearBytesAfterLongAppends) {
  // A prefill-sized append passes through the window in chunks; the window's capacity is given back
  // once its tokens are encoded, so that what the process holds is what bytes() reports (beyond it:
  // each sequence's open page, reserved whole, and its window's room for a block).
  PagedKVCache cache(1, 2, 64, KVPolicy::parse("tq_mse:b=3|rollback=16"), 3);
  const auto keys = testutil::gaussian_matrix(2 * 6000, 64, 1), values = testutil::gaussian_matrix(2 * 6000, 64, 2);
  for (int s = 0; s < 3; ++s) cache.append(cache.add_sequence(), 0, keys.data(), values.data(), 6000);
  EXPECT_LT(static_cast<double>(cache.allocated_bytes()), 1.1 * static_cast<double>(cache.bytes()));
  const SequenceId id = cache.sequences().front();
  const std::vector<float> one = testutil::gaussian_matrix(2, 64, 4);
  for (int t = 0; t < 40; ++t) cache.append(id, 0, one.data(), one.data(), 1);
  EXPECT_LT(static_cast<double>(cache.allocated_bytes()), 1.1 * static_cast<double>(cache.bytes()));
}

TEST(PagedKVCache, ForkSharesSealedPagesAndThenActsAsACopy) {
  const TokenStream prefix(600, 3), left(200, 4), right(150, 5);
  const auto queries = testutil::gaussian_matrix(2 * kHeads, kDim, 6);
  for (const char* spec : kPolicies) {
    SCOPED_TRACE(spec);
    const KVPolicy policy = KVPolicy::parse(spec);
    PagedKVCache cache(2, kHeads, kDim, policy, 7);
    const SequenceId a = cache.add_sequence();
    feed(cache, a, prefix, 0, prefix.total);
    const size_t pages = cache.pages(), bytes = cache.bytes(), one = cache.sequence_bytes(a);
    const SequenceId b = cache.fork(a);
    // Only unsealed pages were copied: the sealed ones are shared and count once.
    const size_t rest = prefix.total - policy.sinks;
    const size_t body = rest >= policy.window + policy.block ? (rest - policy.window) / policy.block * policy.block : 0;
    const size_t sealed = body / policy.page, partial = body % policy.page ? 1 : 0;
    size_t shared_bytes = 0;
    for (size_t layer = 0; layer < 2; ++layer)
      for (size_t h = 0; h < kHeads; ++h)
        shared_bytes += sealed * policy.page *
                        (cache.key_codec(layer, h).code_bytes() + cache.value_codec(layer, h).code_bytes());
    ASSERT_GT(sealed, 0u);
    EXPECT_EQ(cache.pages(), pages + 2 * partial);
    EXPECT_EQ(cache.sequence_bytes(b), one);
    EXPECT_EQ(cache.bytes(), bytes + one - shared_bytes);
    feed(cache, a, left, 0, left.total);
    feed(cache, b, right, 0, right.total);

    // Independent caches fed the same streams.
    PagedKVCache alone_a(2, kHeads, kDim, policy, 7), alone_b(2, kHeads, kDim, policy, 7);
    const SequenceId ia = alone_a.add_sequence(), ib = alone_b.add_sequence();
    feed(alone_a, ia, prefix, 0, prefix.total);
    feed(alone_a, ia, left, 0, left.total);
    feed(alone_b, ib, prefix, 0, prefix.total);
    feed(alone_b, ib, right, 0, right.total);
    for (size_t layer = 0; layer < 2; ++layer) {
      EXPECT_EQ(decode(cache, layer, {a}, queries.data(), 2 * kHeads), decode(alone_a, layer, {ia}, queries.data(), 2 * kHeads));
      EXPECT_EQ(decode(cache, layer, {b}, queries.data(), 2 * kHeads), decode(alone_b, layer, {ib}, queries.data(), 2 * kHeads));
    }
    EXPECT_EQ(cache.sequence_bytes(a), alone_a.sequence_bytes(ia));
    EXPECT_EQ(cache.sequence_bytes(b), alone_b.sequence_bytes(ib));
    // Removing the source leaves the fork whole.
    cache.remove_sequence(a);
    EXPECT_FALSE(cache.contains(a));
    EXPECT_EQ(decode(cache, 0, {b}, queries.data(), 2 * kHeads), decode(alone_b, 0, {ib}, queries.data(), 2 * kHeads));
  }
}

TEST(PagedKVCache, TruncateThenAppendEqualsNeverAppended) {
  const TokenStream stream(500, 8), other(120, 9);
  const auto queries = testutil::gaussian_matrix(2 * kHeads, kDim, 10);
  for (const char* spec : kPolicies) {
    KVPolicy policy = KVPolicy::parse(spec);
    policy.rollback = 20;
    SCOPED_TRACE(policy.spec());
    for (const size_t n : {size_t{1}, size_t{3}, size_t{40}, size_t{97}, size_t{300}, size_t{500}})
      for (const size_t dropped : {size_t{0}, size_t{1}, size_t{5}, size_t{20}}) {
        if (dropped > n) continue;
        SCOPED_TRACE(testing::Message() << n << " tokens, " << dropped << " dropped");
        PagedKVCache cache(2, kHeads, kDim, policy, 11);
        const SequenceId id = cache.add_sequence();
        feed(cache, id, stream, 0, n);
        const SequenceId spare = cache.fork(id);  // shares pages that truncate must not change
        cache.truncate(id, n - dropped);
        EXPECT_EQ(cache.tokens(id, 0), n - dropped);
        feed(cache, id, other, 0, other.total);

        PagedKVCache fresh(2, kHeads, kDim, policy, 11);
        const SequenceId f = fresh.add_sequence();
        feed(fresh, f, stream, 0, n - dropped);
        feed(fresh, f, other, 0, other.total);
        PagedKVCache untouched(2, kHeads, kDim, policy, 11);
        const SequenceId u = untouched.add_sequence();
        feed(untouched, u, stream, 0, n);
        for (size_t layer = 0; layer < 2; ++layer) {
          EXPECT_EQ(decode(cache, layer, {id}, queries.data(), 2 * kHeads),
                    decode(fresh, layer, {f}, queries.data(), 2 * kHeads));
          EXPECT_EQ(decode(cache, layer, {spare}, queries.data(), 2 * kHeads),
                    decode(untouched, layer, {u}, queries.data(), 2 * kHeads));
        }
      }
  }
}

TEST(PagedKVCache, TruncateBeyondRollbackIsRefusedAndChangesNothing) {
  const TokenStream stream(400, 12);
  const auto queries = testutil::gaussian_matrix(kHeads, kDim, 13);
  PagedKVCache cache(1, kHeads, kDim, KVPolicy::parse("tq_mse:b=3|window=32|block=16|page=64|rollback=4"), 1);
  const SequenceId id = cache.add_sequence();
  feed(cache, id, stream, 0, 400);
  const Decoded before = decode(cache, 0, {id}, queries.data(), kHeads);
  const std::string message = testutil::error_of([&] { cache.truncate(id, 300); });
  EXPECT_NE(message.find("rollback=4"), std::string::npos) << message;
  EXPECT_NE(message.find("truncate to at least"), std::string::npos) << message;
  EXPECT_NE(testutil::error_of([&] { cache.truncate(id, 401); }).find("holds 400 tokens"), std::string::npos);
  EXPECT_NE(testutil::error_of([&] { cache.truncate(99, 1); }).find("no sequence 99"), std::string::npos);
  EXPECT_EQ(cache.tokens(id, 0), 400u);
  EXPECT_EQ(decode(cache, 0, {id}, queries.data(), kHeads), before);
  // Within the window it always works, rollback or not.
  cache.truncate(id, 395);
  EXPECT_EQ(cache.tokens(id, 0), 395u);
}

TEST(PagedKVCache, BatchEqualsSeparateCallsOnAnyExecutor) {
  const KVPolicy policy = KVPolicy::parse("tq_prod:b=3|tq_mse:b=3|window=32|block=16|page=64");
  PagedKVCache cache(1, kHeads, kDim, policy, 14);
  std::vector<SequenceId> ids;
  for (const size_t n : {size_t{0}, size_t{3}, size_t{50}, size_t{333}, size_t{900}}) {
    ids.push_back(cache.add_sequence());
    feed(cache, ids.back(), TokenStream(std::max<size_t>(n, 1), 20 + n), 0, n);
  }
  ids.push_back(ids[3]);  // the same sequence twice
  const size_t q_heads = 3 * kHeads;
  const auto queries = testutil::gaussian_matrix(ids.size() * q_heads, kDim, 15);
  const Decoded batch = decode(cache, 0, ids, queries.data(), q_heads);
  for (size_t b = 0; b < ids.size(); ++b) {
    const Decoded one = decode(cache, 0, {ids[b]}, queries.data() + b * q_heads * kDim, q_heads);
    EXPECT_EQ(0, std::memcmp(one.output.data(), batch.output.data() + b * q_heads * kDim, one.output.size() * 4));
    EXPECT_EQ(0, std::memcmp(one.lse.data(), batch.lse.data() + b * q_heads, one.lse.size() * 4));
  }
  // The empty sequence attends to nothing.
  EXPECT_TRUE(std::isinf(batch.lse[0]) && batch.lse[0] < 0);
  EXPECT_EQ(batch.output[0], 0.0f);
  // One thread, two threads, and the caller's own threads through a callback.
  AttentionOptions one_thread;
  one_thread.threads = 1;
  EXPECT_EQ(decode(cache, 0, ids, queries.data(), q_heads, one_thread), batch);
  OpenMPExecutor two(2);
  AttentionOptions two_threads;
  two_threads.executor = &two;
  EXPECT_EQ(decode(cache, 0, ids, queries.data(), q_heads, two_threads), batch);
  std::atomic<size_t> tasks_run{0};
  CallbackExecutor callback(
      [](void* user, size_t count, TaskFunction task, void* context) {
        // Three threads of "the engine", each taking every third task, in reverse.
        std::vector<std::thread> threads;
        for (size_t t = 0; t < 3; ++t)
          threads.emplace_back([=] {
            for (size_t i = count; i-- > 0;)
              if (i % 3 == t) task(context, i);
          });
        for (auto& thread : threads) thread.join();
        *static_cast<std::atomic<size_t>*>(user) += count;
      },
      &tasks_run);
  AttentionOptions engine;
  engine.executor = &callback;
  EXPECT_EQ(decode(cache, 0, ids, queries.data(), q_heads, engine), batch);
  EXPECT_GT(tasks_run.load(), ids.size());
  // lse may be left out.
  std::vector<float> output(ids.size() * q_heads * kDim);
  cache.decode(0, ids.data(), ids.size(), queries.data(), q_heads, output.data(), nullptr);
  EXPECT_EQ(output, batch.output);
}

TEST(PagedKVCache, FirstTokensCalibrationIsACalibrationObject) {
  const TokenStream stream(300, 16);
  const KVPolicy policy = KVPolicy::parse("qjl:m=128,outliers=8|center:tq_mse:b=3|window=32|block=16|page=32");
  PagedKVCache lazy(2, kHeads, kDim, policy, 17);
  EXPECT_TRUE(lazy.calibration().needs_data());
  EXPECT_FALSE(lazy.calibration().fitted(0));
  const SequenceId a = lazy.add_sequence();
  feed(lazy, a, stream, 0, stream.total);
  ASSERT_TRUE(lazy.calibration().complete());
  EXPECT_GT(lazy.calibration().bytes(), 0u);

  // The same object, fitted explicitly on the first sinks + window + block tokens as fp16 holds them.
  Calibration explicit_fit(2, kHeads, kDim, policy, 17);
  const size_t first = policy.sinks + policy.window + policy.block;
  auto kv_pair = stream.slice(0, first);
  auto& k = kv_pair.first;
  auto& v = kv_pair.second;
  for (auto* x : {&k, &v})
    for (float& value : *x) value = half_to_float(float_to_half(value));
  for (size_t layer = 0; layer < 2; ++layer) explicit_fit.fit(layer, k.data(), v.data(), first);
  EXPECT_TRUE(explicit_fit == lazy.calibration());

  // A cache built from it encodes as the lazy one did; a second sequence shares the calibration.
  const std::string path = testing::TempDir() + "kvsketch_paged.kvcal";
  explicit_fit.save(path);
  const Calibration loaded = Calibration::load(path);
  EXPECT_TRUE(loaded == explicit_fit);
  PagedKVCache from_file(loaded);
  const SequenceId b = from_file.add_sequence();
  feed(from_file, b, stream, 0, stream.total);
  const auto queries = testutil::gaussian_matrix(kHeads, kDim, 18);
  EXPECT_EQ(decode(from_file, 1, {b}, queries.data(), kHeads), decode(lazy, 1, {a}, queries.data(), kHeads));
  const SequenceId c = lazy.add_sequence();
  const TokenStream later(200, 19);
  feed(lazy, c, later, 0, later.total);
  EXPECT_TRUE(explicit_fit == lazy.calibration());
}

TEST(Calibration, CorruptAndInconsistentFilesAreRefused) {
  const TokenStream stream(100, 21);
  const KVPolicy policy = KVPolicy::parse("qjl:m=128,outliers=8|tq_mse:b=3");
  Calibration calibration(1, kHeads, kDim, policy, 3);
  const auto kv_pair = stream.slice(0, 100);
  const auto& k = kv_pair.first;
  const auto& v = kv_pair.second;
  calibration.fit(0, k.data(), v.data(), 100);
  const std::string path = testing::TempDir() + "kvsketch_calibration.kvcal";
  calibration.save(path);
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto load_of = [&](const std::string& bytes) {
    const std::string bad = testing::TempDir() + "kvsketch_calibration_bad.kvcal";
    std::ofstream(bad, std::ios::binary) << bytes;
    return testutil::error_of([&] { Calibration::load(bad); });
  };
  EXPECT_NE(load_of(file.substr(0, file.size() - 9)).find("kvsketch_calibration_bad.kvcal"), std::string::npos);
  std::string flipped = file;
  flipped[60] ^= 1;
  EXPECT_NE(load_of(flipped).find("CRC-32 mismatch"), std::string::npos) << load_of(flipped);
  // Flags and lengths no writer writes, under a matching checksum.
  const std::string policy_text = policy.spec();
  const size_t states = 16 + 8 + 4 * 8 + 8 + policy_text.size();  // the first head's fitted flag
  EXPECT_NE(load_of(testutil::resealed(file, states, 2)).find("fitted flag 2"), std::string::npos);
  EXPECT_NE(load_of(testutil::resealed(file, states + 8, 1u << 20)).find("truncated or corrupted"), std::string::npos);
  // Fitting refuses NaN and empty samples, and leaves the layer as it was.
  std::vector<float> nan_keys = k;
  nan_keys[kDim * 50 + 3] = std::nanf("");
  const Calibration before = calibration;
  EXPECT_NE(testutil::error_of([&] { calibration.fit(0, nan_keys.data(), v.data(), 100); }).find("NaN"),
            std::string::npos);
  EXPECT_TRUE(before == calibration);
  EXPECT_NE(testutil::error_of([&] { calibration.fit(0, k.data(), v.data(), 0); }).find("no tokens"),
            std::string::npos);
}

TEST(PagedKVCache, AnAppendRefusedWhileEncodingUndoesItsFirstFit) {
  // A token whose norm fp16 cannot hold passes the range check and is refused when its block is
  // encoded: by then the append has fitted the calibration and moved the window.
  const KVPolicy policy = KVPolicy::parse("qjl:m=128,outliers=8|tq_mse:b=3|window=16|block=16|page=32");
  const TokenStream stream(200, 70);
  PagedKVCache cache(1, kHeads, kDim, policy, 2);
  const SequenceId id = cache.add_sequence();
  feed(cache, id, stream, 0, 10);
  auto bad_pair = stream.slice(10, 50);
  auto& bad_keys = bad_pair.first;
  for (size_t c = 0; c < kDim; ++c) bad_keys[20 * kDim + c] = 60000.0f;  // head 0, token 30
  const size_t bytes = cache.bytes();
  const std::string message =
      testutil::error_of([&] { cache.append(id, 0, bad_keys.data(), bad_pair.second.data(), 50); });
  EXPECT_NE(message.find("norm"), std::string::npos) << message;
  EXPECT_EQ(cache.bytes(), bytes);
  EXPECT_EQ(cache.tokens(id, 0), 10u);
  EXPECT_FALSE(cache.calibration().fitted(0));
  // Going on gives what a cache that never saw it gives.
  feed(cache, id, stream, 10, 190);
  PagedKVCache clean(1, kHeads, kDim, policy, 2);
  const SequenceId c = clean.add_sequence();
  feed(clean, c, stream, 0, 200);
  const auto queries = testutil::gaussian_matrix(kHeads, kDim, 71);
  EXPECT_EQ(decode(cache, 0, {id}, queries.data(), kHeads), decode(clean, 0, {c}, queries.data(), kHeads));
  EXPECT_TRUE(cache.calibration() == clean.calibration());
}

TEST(PagedKVCache, PrefillIsCausalAndEndsWithDecodesBits) {
  const TokenStream stream(400, 30);
  const size_t group = 2, q_heads = group * kHeads, chunk = 150;
  const auto queries = testutil::gaussian_matrix(chunk * q_heads, kDim, 31);
  // fp16 bodies hold the tokens exactly: every position's answer is exact attention over its prefix.
  for (const char* spec :
       {"fp16|window=32|block=16|page=64", "tq_mse:b=3|window=32|block=16|page=64", "kivi:b=4|window=32|block=32|page=64"}) {
    SCOPED_TRACE(spec);
    PagedKVCache cache(1, kHeads, kDim, KVPolicy::parse(spec), 3);
    const SequenceId id = cache.add_sequence();
    feed(cache, id, stream, 0, stream.total - chunk);
    const auto kv_pair = stream.slice(stream.total - chunk, chunk);
    const auto& k = kv_pair.first;
    const auto& v = kv_pair.second;
    cache.append(id, 0, k.data(), v.data(), chunk);
    std::vector<float> output(chunk * q_heads * kDim), lse(chunk * q_heads);
    cache.prefill(0, id, chunk, queries.data(), q_heads, output.data(), lse.data());
    const Decoded last = decode(cache, 0, {id}, queries.data() + (chunk - 1) * q_heads * kDim, q_heads);
    EXPECT_EQ(0, std::memcmp(last.output.data(), output.data() + (chunk - 1) * q_heads * kDim, last.output.size() * 4));
    EXPECT_EQ(0, std::memcmp(last.lse.data(), lse.data() + (chunk - 1) * q_heads, last.lse.size() * 4));
    const auto all_kall_v_pair = stream.slice(0, stream.total);
    const auto& all_k = all_kall_v_pair.first;
    const auto& all_v = all_kall_v_pair.second;
    double worst = 0.0, total = 0.0, last_total = 0.0;
    size_t count = 0, last_count = 0;
    for (size_t i = 0; i < chunk; i += 7)
      for (size_t g = 0; g < kHeads; ++g) {
        const size_t prefix = stream.total - chunk + i + 1;
        std::vector<float> keys(all_k.begin() + static_cast<std::ptrdiff_t>(g * stream.total * kDim),
                                all_k.begin() + static_cast<std::ptrdiff_t>((g * stream.total + prefix) * kDim));
        std::vector<float> values(all_v.begin() + static_cast<std::ptrdiff_t>(g * stream.total * kDim),
                                  all_v.begin() + static_cast<std::ptrdiff_t>((g * stream.total + prefix) * kDim));
        for (auto* x : {&keys, &values})
          for (float& value : *x) value = half_to_float(float_to_half(value));
        const float* q = queries.data() + (i * q_heads + g * group) * kDim;
        const AttentionResult exact = reference_attention(q, group, keys.data(), values.data(), prefix, kDim);
        for (size_t j = 0; j < group * kDim; ++j) {
          const double error = std::abs(double(output[(i * q_heads + g * group) * kDim + j]) - exact.output[j]);
          worst = std::max(worst, error);
          total += error;
          ++count;
          if (i + 7 >= chunk) {
            last_total += error;
            ++last_count;
          }
        }
        for (size_t h = 0; h < group; ++h)
          worst = std::max(worst, std::abs(double(lse[i * q_heads + g * group + h]) - exact.lse[h]) / 10);
      }
    // fp16 bodies: float rounding only. 3-bit codes: every position's error is the codec's, about
    // what the last position's (decode's own) is.
    if (std::string(spec).rfind("fp16", 0) == 0) {
      EXPECT_LT(worst, 1e-5);
    } else {
      EXPECT_LT(total / count, 1.5 * last_total / last_count) << total / count << " " << last_total / last_count;
      EXPECT_GT(total / count, 0.5 * last_total / last_count);
    }
  }
  PagedKVCache cache(1, kHeads, kDim, KVPolicy::parse("tq_mse:b=3"), 3);
  const SequenceId id = cache.add_sequence();
  std::vector<float> output(q_heads * kDim);
  EXPECT_NE(testutil::error_of([&] { cache.prefill(0, id, 1, queries.data(), q_heads, output.data(), nullptr); })
                .find("holds 0"),
            std::string::npos);
}

// attend_chunk, before the chunk's append: each query's answer is decode's over the past merged with
// exact attention over the chunk's fp16 tokens up to its own; it leaves the cache as it was; and a
// chunk longer than the window comes out nearer exact attention than prefill() after the append.
TEST(PagedKVCache, AttendChunkReadsThePastAsStoredAndTheChunkExactly) {
  const TokenStream stream(400, 32);
  const size_t group = 2, q_heads = group * kHeads, chunk = 150, past = stream.total - chunk;
  const auto queries = testutil::gaussian_matrix(chunk * q_heads, kDim, 33);
  // Named pairs, not structured bindings: clang 14 does not let lambdas capture those.
  const auto chunk_rows = stream.slice(past, chunk), all_rows = stream.slice(0, stream.total);
  const std::vector<float>&k = chunk_rows.first, &v = chunk_rows.second;
  const std::vector<float>&all_k = all_rows.first, &all_v = all_rows.second;
  // Exact fp32 attention of position i's query heads of KV head g over its prefix, as fp16 holds it.
  const auto exact = [&](size_t i, size_t g) {
    const size_t prefix = past + i + 1;
    std::vector<float> keys(prefix * kDim), values(prefix * kDim);
    for (size_t j = 0; j < prefix * kDim; ++j) {
      keys[j] = half_to_float(float_to_half(all_k[g * stream.total * kDim + j]));
      values[j] = half_to_float(float_to_half(all_v[g * stream.total * kDim + j]));
    }
    return reference_attention(queries.data() + (i * q_heads + g * group) * kDim, group, keys.data(), values.data(),
                               prefix, kDim);
  };
  for (const char* spec : {"fp16|window=32|block=16|page=64", "tq_mse:b=3|window=32|block=16|page=64",
                           "kivi:b=2|window=32|block=32|page=64"}) {
    SCOPED_TRACE(spec);
    PagedKVCache cache(1, kHeads, kDim, KVPolicy::parse(spec), 3);
    const SequenceId id = cache.add_sequence();
    feed(cache, id, stream, 0, past);
    std::vector<float> output(chunk * q_heads * kDim), lse(chunk * q_heads);
    cache.attend_chunk(0, id, chunk, queries.data(), q_heads, k.data(), v.data(), output.data(), lse.data());
    EXPECT_EQ(cache.tokens(id, 0), past);
    double worst_merge = 0.0, chunk_error = 0.0, prefill_error = 0.0;
    std::vector<float> prefilled(chunk * q_heads * kDim);
    {
      PagedKVCache appended(1, kHeads, kDim, KVPolicy::parse(spec), 3);
      const SequenceId a = appended.add_sequence();
      feed(appended, a, stream, 0, past);
      appended.append(a, 0, k.data(), v.data(), chunk);
      appended.prefill(0, a, chunk, queries.data(), q_heads, prefilled.data(), nullptr);
    }
    for (size_t i = 0; i < chunk; i += 5) {
      const Decoded before = decode(cache, 0, {id}, queries.data() + i * q_heads * kDim, q_heads);
      for (size_t g = 0; g < kHeads; ++g) {
        std::vector<float> keys(k.begin() + static_cast<std::ptrdiff_t>(g * chunk * kDim),
                                k.begin() + static_cast<std::ptrdiff_t>((g * chunk + i + 1) * kDim));
        std::vector<float> values(v.begin() + static_cast<std::ptrdiff_t>(g * chunk * kDim),
                                  v.begin() + static_cast<std::ptrdiff_t>((g * chunk + i + 1) * kDim));
        for (auto* x : {&keys, &values})
          for (float& value : *x) value = half_to_float(float_to_half(value));
        const size_t first = i * q_heads + g * group;
        const AttentionResult own =
            reference_attention(queries.data() + first * kDim, group, keys.data(), values.data(), i + 1, kDim);
        std::vector<float> merged(group * kDim), merged_lse(group);
        merge_attention_states(before.output.data() + g * group * kDim, before.lse.data() + g * group,
                               own.output.data(), own.lse.data(), group, kDim, merged.data(), merged_lse.data());
        const AttentionResult reference = exact(i, g);
        for (size_t j = 0; j < group * kDim; ++j) {
          worst_merge = std::max(worst_merge, double(std::abs(output[first * kDim + j] - merged[j])));
          chunk_error += std::abs(double(output[first * kDim + j]) - reference.output[j]);
          prefill_error += std::abs(double(prefilled[first * kDim + j]) - reference.output[j]);
        }
        for (size_t h = 0; h < group; ++h)
          worst_merge = std::max(worst_merge, double(std::abs(lse[first + h] - merged_lse[h])) / 10);
      }
    }
    EXPECT_LT(worst_merge, 2e-5);
    if (std::string(spec).rfind("fp16", 0) == 0) {
      EXPECT_NEAR(chunk_error, prefill_error, 1e-3 * (1 + prefill_error));
    } else {  // the chunk's 150 tokens exact, against all but its last 32-48 compressed (ratios 0.79-0.81)
      EXPECT_LT(chunk_error, 0.85 * prefill_error) << chunk_error << " " << prefill_error;
    }
    // Appended afterwards, the sequence is the one a plain append makes.
    cache.append(id, 0, k.data(), v.data(), chunk);
    PagedKVCache clean(1, kHeads, kDim, KVPolicy::parse(spec), 3);
    const SequenceId c = clean.add_sequence();
    feed(clean, c, stream, 0, past);
    clean.append(c, 0, k.data(), v.data(), chunk);
    EXPECT_EQ(decode(cache, 0, {id}, queries.data(), q_heads), decode(clean, 0, {c}, queries.data(), q_heads));
  }
  PagedKVCache cache(1, kHeads, kDim, KVPolicy::parse("tq_mse:b=3"), 3);
  const SequenceId id = cache.add_sequence();
  std::vector<float> output(chunk * q_heads * kDim), bad(k);
  bad[kDim * 3 + 1] = std::nanf("");
  EXPECT_NE(testutil::error_of([&] {
              cache.attend_chunk(0, id, chunk, queries.data(), q_heads, bad.data(), v.data(), output.data(), nullptr);
            }).find("keys"),
            std::string::npos);
  EXPECT_NE(testutil::error_of([&] {
              cache.attend_chunk(0, id, chunk, queries.data(), q_heads, nullptr, v.data(), output.data(), nullptr);
            }).find("null keys"),
            std::string::npos);
  EXPECT_EQ(cache.tokens(id, 0), 0u);
}

// read() gives the rows attention reads: fp16 sinks and window as fp16 holds them, body rows as
// the codec decodes them; attention over them in float equals decode's float arithmetic.
TEST(PagedKVCache, ReadGivesTheRowsAttentionReads) {
  const TokenStream stream(500, 40);
  const size_t group = 2, q_heads = group * kHeads;
  const auto queries = testutil::gaussian_matrix(q_heads, kDim, 41);
  AttentionOptions in_float;
  in_float.arithmetic = Arithmetic::kFloat;
  std::vector<std::string> specs(std::begin(kPolicies), std::end(kPolicies));
  specs.push_back("tq_mse:b=3|window=32|block=16|page=64|rollback=20");  // a window that keeps encoded rows
  for (const std::string& spec : specs) {
    SCOPED_TRACE(spec);
    PagedKVCache cache(2, kHeads, kDim, KVPolicy::parse(spec), 5);
    const SequenceId id = cache.add_sequence();
    feed(cache, id, stream, 0, stream.total);
    const size_t n = cache.tokens(id, 1);
    std::vector<float> keys(kHeads * n * kDim), values(kHeads * n * kDim);
    cache.read(id, 1, 0, n, keys.data(), values.data());
    const auto all = stream.slice(0, stream.total);
    const TokenSplit split = split_tokens(n, cache.policy().sinks, cache.policy().window, cache.policy().block);
    for (size_t g = 0; g < kHeads; ++g)
      for (size_t t = 0; t < n; ++t)
        for (size_t j = 0; j < kDim; ++j) {
          const size_t at = (g * n + t) * kDim + j;
          const bool fp16 = t < split.sinks || t >= split.sinks + split.body;
          if (fp16) {
            ASSERT_EQ(keys[at], half_to_float(float_to_half(all.first[at]))) << g << " " << t;
            ASSERT_EQ(values[at], half_to_float(float_to_half(all.second[at])));
          }
        }
    // Body rows are the codecs' decodes of what was encoded: near the input, never equal to it all.
    double error = 0.0, energy = 0.0;
    for (size_t i = 0; i < keys.size(); ++i) {
      error += (keys[i] - all.first[i]) * double(keys[i] - all.first[i]);
      energy += all.first[i] * double(all.first[i]);
    }
    EXPECT_GT(error / energy, 1e-6);
    EXPECT_LT(error / energy, 1.0);
    const Decoded step = decode(cache, 1, {id}, queries.data(), q_heads, in_float);
    for (size_t g = 0; g < kHeads; ++g) {
      const AttentionResult exact = reference_attention(queries.data() + g * group * kDim, group,
                                                        keys.data() + g * n * kDim, values.data() + g * n * kDim, n, kDim);
      for (size_t j = 0; j < group * kDim; ++j) EXPECT_NEAR(step.output[g * group * kDim + j], exact.output[j], 2e-5);
      for (size_t h = 0; h < group; ++h) EXPECT_NEAR(step.lse[g * group + h], exact.lse[h], 2e-4);
    }
    // A range reads the same rows as the whole; a fork reads what its source reads.
    std::vector<float> part_keys(kHeads * 37 * kDim), part_values(part_keys.size());
    cache.read(cache.fork(id), 1, 101, 37, part_keys.data(), part_values.data());
    for (size_t g = 0; g < kHeads; ++g)
      EXPECT_EQ(0, std::memcmp(part_values.data() + g * 37 * kDim, values.data() + (g * n + 101) * kDim, 37 * kDim * 4));
    EXPECT_NE(testutil::error_of([&] { cache.read(id, 1, n - 3, 4, keys.data(), values.data()); }).find("out of range"),
              std::string::npos);
    EXPECT_NE(testutil::error_of([&] { cache.read(id, 2, 0, 1, keys.data(), values.data()); }).find("layer 2"),
              std::string::npos);
  }
}

TEST(PagedKVCache, PlannedRangesMergeToTheStep) {
  const TokenStream stream(2000, 60);
  const size_t q_heads = 2 * kHeads;
  const auto queries = testutil::gaussian_matrix(q_heads, kDim, 61);
  for (const char* spec : {"tq_mse:b=3|window=32|block=16|page=64", "kivi:b=4|window=32|block=32|page=64"}) {
    SCOPED_TRACE(spec);
    PagedKVCache cache(1, kHeads, kDim, KVPolicy::parse(spec), 5);
    const SequenceId id = cache.add_sequence();
    feed(cache, id, stream, 0, stream.total);
    AttentionOptions options;
    options.tokens_per_task = 256;
    const std::vector<TokenRange> ranges = cache.plan(0, id, options);
    // The ranges cover every token once.
    std::vector<int> covered(stream.total);
    for (const TokenRange& r : ranges)
      for (size_t t = r.first; t < r.first + r.count; ++t) ++covered[t];
    EXPECT_EQ(std::count(covered.begin(), covered.end(), 1), static_cast<std::ptrdiff_t>(stream.total));
    EXPECT_GT(ranges.size(), 5u);
    // Each range's partial result, merged, is the step (float rounding apart); all of it is its bits.
    std::vector<float> merged(q_heads * kDim), merged_lse(q_heads, -INFINITY), part(q_heads * kDim), part_lse(q_heads);
    for (const TokenRange& r : ranges) {
      cache.decode_range(0, id, r, queries.data(), q_heads, part.data(), part_lse.data(), options);
      merge_attention_states(merged.data(), merged_lse.data(), part.data(), part_lse.data(), q_heads, kDim,
                             merged.data(), merged_lse.data());
    }
    const Decoded step = decode(cache, 0, {id}, queries.data(), q_heads, options);
    for (size_t i = 0; i < merged.size(); ++i) ASSERT_NEAR(merged[i], step.output[i], 1e-5f);
    for (size_t h = 0; h < q_heads; ++h) ASSERT_NEAR(merged_lse[h], step.lse[h], 1e-5f);
    cache.decode_range(0, id, {0, stream.total}, queries.data(), q_heads, part.data(), part_lse.data(), options);
    EXPECT_EQ(part, step.output);
    // Ranges cut anywhere (inside quads and KIVI's groups) merge to the step as well.
    std::fill(merged_lse.begin(), merged_lse.end(), -INFINITY);
    for (const TokenRange& r : {TokenRange{0, 3}, TokenRange{3, 1001}, TokenRange{1004, 7}, TokenRange{1011, 989}}) {
      cache.decode_range(0, id, r, queries.data(), q_heads, part.data(), part_lse.data(), options);
      merge_attention_states(merged.data(), merged_lse.data(), part.data(), part_lse.data(), q_heads, kDim,
                             merged.data(), merged_lse.data());
    }
    // KIVI's decoded rows are exact where the fused integer kernel rounds: a codec-sized tolerance.
    for (size_t i = 0; i < merged.size(); ++i) ASSERT_NEAR(merged[i], step.output[i], 2e-3f);
    EXPECT_NE(testutil::error_of([&] {
                cache.decode_range(0, id, {1990, 11}, queries.data(), q_heads, part.data(), part_lse.data());
              }).find("beyond the 2000 tokens"),
              std::string::npos);
  }
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(PagedKVCacheFile, RoundTripsKeepSharingAndBits) {
  const TokenStream prefix(500, 40), left(90, 41), right(170, 42);
  const auto queries = testutil::gaussian_matrix(2 * kHeads, kDim, 43);
  const KVPolicy policy =
      KVPolicy::parse("qjl:m=128,outliers=8|center:tq_mse:b=3|window=32|block=16|page=64|rollback=16");
  PagedKVCache cache(2, kHeads, kDim, policy, 44);
  const SequenceId a = cache.add_sequence();
  feed(cache, a, prefix, 0, prefix.total);
  const SequenceId b = cache.fork(a);
  feed(cache, a, left, 0, left.total);
  feed(cache, b, right, 0, right.total);
  cache.remove_sequence(cache.add_sequence());  // ids need not be dense
  const SequenceId c = cache.add_sequence();    // an empty one
  const std::string path = testing::TempDir() + "kvsketch_paged.kvp";
  cache.save(path);
  PagedKVCache loaded = PagedKVCache::load(path);
  EXPECT_EQ(loaded.sequences(), cache.sequences());
  EXPECT_EQ(loaded.bytes(), cache.bytes());
  EXPECT_EQ(loaded.pages(), cache.pages());
  EXPECT_TRUE(loaded.calibration() == cache.calibration());
  for (size_t layer = 0; layer < 2; ++layer)
    for (const SequenceId id : {a, b, c})
      EXPECT_EQ(decode(loaded, layer, {id}, queries.data(), 2 * kHeads), decode(cache, layer, {id}, queries.data(), 2 * kHeads));
  // Both go on alike: appends, truncation within rollback, new ids.
  for (PagedKVCache* x : {&cache, &loaded}) {
    feed(*x, b, left, 0, 40);
    x->truncate(a, x->tokens(a, 0) - 10);
  }
  EXPECT_EQ(loaded.add_sequence(), cache.add_sequence());
  EXPECT_EQ(decode(loaded, 1, {a, b}, queries.data(), kHeads), decode(cache, 1, {a, b}, queries.data(), kHeads));

  // One sequence into another cache of the same model: the same bits.
  const std::string one = testing::TempDir() + "kvsketch_sequence.kvs";
  cache.save_sequence(b, one);
  PagedKVCache other(cache.calibration());
  const SequenceId moved = other.load_sequence(one);
  EXPECT_EQ(decode(other, 0, {moved}, queries.data(), 2 * kHeads), decode(cache, 0, {b}, queries.data(), 2 * kHeads));
  EXPECT_EQ(other.sequence_bytes(moved), cache.sequence_bytes(b));
  // Not into a cache of another policy, seed or calibration.
  const auto refused = [&](PagedKVCache& target) { return testutil::error_of([&] { target.load_sequence(one); }); };
  KVPolicy wider = policy;
  wider.window = 48;
  PagedKVCache other_policy(2, kHeads, kDim, wider, 44), other_seed(2, kHeads, kDim, policy, 45),
      other_shape(3, kHeads, kDim, policy, 44), unfitted(2, kHeads, kDim, policy, 44);
  EXPECT_NE(refused(other_policy).find("policy"), std::string::npos);
  EXPECT_NE(refused(other_seed).find("seed 44"), std::string::npos);
  EXPECT_NE(refused(other_shape).find("3 x 2 x 64"), std::string::npos);
  EXPECT_NE(refused(unfitted).find("another calibration of layer 0"), std::string::npos);
  EXPECT_NE(testutil::error_of([&] { PagedKVCache::load(one); }).find("magic"), std::string::npos);
}

TEST(PagedKVCacheFile, CorruptAndInconsistentFilesAreRefused) {
  const TokenStream stream(300, 50);
  PagedKVCache cache(1, kHeads, kDim, KVPolicy::parse("tq_mse:b=3|window=32|block=16|page=64"), 1);
  const SequenceId id = cache.add_sequence();
  feed(cache, id, stream, 0, stream.total);
  cache.fork(id);
  const std::string path = testing::TempDir() + "kvsketch_paged_bad_source.kvp";
  cache.save(path);
  const std::string file = file_bytes(path);
  const auto load_of = [&](const std::string& bytes) {
    const std::string bad = testing::TempDir() + "kvsketch_paged_bad.kvp";
    std::ofstream(bad, std::ios::binary) << bytes;
    return testutil::error_of([&] { PagedKVCache::load(bad); });
  };
  EXPECT_NE(load_of(file.substr(0, file.size() - 5)).find("kvsketch_paged_bad.kvp"), std::string::npos);
  std::string flipped = file;
  flipped[file.size() / 2] ^= 4;
  EXPECT_NE(load_of(flipped).find("CRC-32 mismatch"), std::string::npos);
  // Under a matching checksum: u64 fields of the header and the first page, and places all over
  // the file, set to values no writer writes. Each is refused with an error, or loads a cache whose
  // attention is finite.
  size_t refused = 0;
  const auto queries = testutil::gaussian_matrix(kHeads, kDim, 51);
  for (size_t at = 16; at + 8 <= file.size() - 16; at += at < 400 ? 8 : 1231) {
    for (const uint64_t value : {uint64_t{1} << 40, uint64_t{3}, ~uint64_t{0}}) {
      const std::string bad = testing::TempDir() + "kvsketch_paged_bad.kvp";
      std::ofstream(bad, std::ios::binary) << testutil::resealed(file, at, value);
      try {
        const PagedKVCache loaded = PagedKVCache::load(bad);
        for (const SequenceId s : loaded.sequences()) {
          const Decoded d = decode(loaded, 0, {s}, queries.data(), kHeads);
          for (const float x : d.output) ASSERT_TRUE(std::isfinite(x)) << "offset " << at;
        }
      } catch (const Error&) {
        ++refused;
      }
    }
  }
  EXPECT_GT(refused, 60u);
}

TEST(PagedKVCache, BadCallsNameTheProblem) {
  PagedKVCache cache(2, kHeads, kDim, KVPolicy::parse("tq_mse:b=3|window=16|block=16|page=32"), 1);
  const SequenceId id = cache.add_sequence();
  const TokenStream stream(100, 22);
  feed(cache, id, stream, 0, 100);
  const auto queries = testutil::gaussian_matrix(2 * kHeads, kDim, 23);
  std::vector<float> out(2 * kHeads * kDim);
  const auto error = [&](const std::function<void()>& call) { return testutil::error_of(call); };
  EXPECT_NE(error([&] { cache.decode(2, &id, 1, queries.data(), kHeads, out.data(), nullptr); }).find("layer 2"),
            std::string::npos);
  const SequenceId missing = 42;
  EXPECT_NE(error([&] { cache.decode(0, &missing, 1, queries.data(), kHeads, out.data(), nullptr); })
                .find("no sequence 42"),
            std::string::npos);
  EXPECT_NE(error([&] { cache.decode(0, &id, 1, queries.data(), 3, out.data(), nullptr); }).find("multiple"),
            std::string::npos);
  EXPECT_NE(error([&] { cache.decode(0, &id, 1, queries.data(), kHeads, nullptr, nullptr); }).find("null output"),
            std::string::npos);
  EXPECT_NE(error([&] { cache.decode(0, nullptr, 1, queries.data(), kHeads, out.data(), nullptr); }).find("null"),
            std::string::npos);
  auto nan_queries = queries;
  nan_queries[5] = std::nanf("");
  EXPECT_NE(error([&] { cache.decode(0, &id, 1, nan_queries.data(), kHeads, out.data(), nullptr); }).find("NaN"),
            std::string::npos);
  // A refused append changes nothing.
  auto kv_pair = stream.slice(0, 50);
  auto& k = kv_pair.first;
  auto& v = kv_pair.second;
  k[kDim * 60 + 1] = 1e6f;
  const size_t bytes = cache.bytes();
  EXPECT_NE(error([&] { cache.append(id, 0, k.data(), v.data(), 50); }).find("65504"), std::string::npos);
  EXPECT_EQ(cache.bytes(), bytes);
  EXPECT_EQ(cache.tokens(id, 0), 100u);
  EXPECT_NE(error([&] { cache.append(7, 0, k.data(), v.data(), 50); }).find("no sequence 7"), std::string::npos);
  EXPECT_NE(error([&] { cache.fork(7); }).find("no sequence 7"), std::string::npos);
  EXPECT_NE(error([&] { cache.remove_sequence(7); }).find("no sequence 7"), std::string::npos);
  EXPECT_NE(error([] { KVPolicy::parse("tq_mse:b=3|block=32|page=48"); }).find("page must be a multiple of block"),
            std::string::npos);
}

}  // namespace
}  // namespace kvsketch

namespace kvsketch {
namespace {

// Runs call c's tasks on its own thread c, started idle beforehand: the counted call runs on a
// thread that has never run a task, as a pool's threads take an engine's tasks in any order.
class ThreadPerCallExecutor final : public Executor {
 public:
  explicit ThreadPerCallExecutor(size_t calls) : slots_(calls) {
    for (Slot& slot : slots_) slot.thread = std::thread([&slot] { slot.serve(); });
  }
  ~ThreadPerCallExecutor() override {
    for (Slot& slot : slots_) slot.post(0, nullptr, nullptr);
    for (Slot& slot : slots_) slot.thread.join();
  }
  void run(size_t count, TaskFunction task, void* context) override {
    require(next_ < slots_.size(), "ThreadPerCallExecutor: more calls than threads");
    slots_[next_++].post(count, task, context);
  }

 private:
  struct Slot {
    std::thread thread;
    std::mutex mutex;
    std::condition_variable changed;
    bool posted = false, done = false;
    size_t count = 0;
    TaskFunction task = nullptr;
    void* context = nullptr;
    // Hands the batch (or, with a null task, the order to stop) to the thread and waits for it.
    void post(size_t n, TaskFunction f, void* c) {
      std::unique_lock lock(mutex);
      count = n;
      task = f;
      context = c;
      posted = true;
      changed.notify_all();
      changed.wait(lock, [&] { return done; });
      done = false;
    }
    void serve() {
      for (;;) {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return posted; });
        posted = false;
        const bool stop = task == nullptr;
        for (size_t i = 0; i < count && task; ++i) task(context, i);
        done = true;
        changed.notify_all();
        if (stop) return;
      }
    }
  };
  std::vector<Slot> slots_;
  size_t next_ = 0;
};

// Allocations of one warm decode call (the same call made twice before), on OpenMP threads, or with
// `cold_thread` on a thread that has never run a task.
size_t warm_decode_allocations(const char* spec, size_t threads, size_t batch, Arithmetic arithmetic,
                               bool cold_thread = false) {
  const TokenStream stream(3000, 60);
  PagedKVCache cache(1, kHeads, kDim, KVPolicy::parse(spec), 2);
  std::vector<SequenceId> ids;
  for (size_t b = 0; b < batch; ++b) {
    ids.push_back(cache.add_sequence());
    feed(cache, ids.back(), stream, 0, 1000 + 700 * b);
  }
  const size_t q_heads = 2 * kHeads;
  const auto queries = testutil::gaussian_matrix(batch * q_heads, kDim, 61);
  std::vector<float> output(batch * q_heads * kDim), lse(batch * q_heads);
  AttentionOptions options;
  options.threads = static_cast<int>(threads);
  options.arithmetic = arithmetic;
  ThreadPerCallExecutor per_call(3);
  if (cold_thread) options.executor = &per_call;
  for (int warm = 0; warm < 2; ++warm)
    cache.decode(0, ids.data(), batch, queries.data(), q_heads, output.data(), lse.data(), options);
  testutil::reset_allocations();
  cache.decode(0, ids.data(), batch, queries.data(), q_heads, output.data(), lse.data(), options);
  return testutil::allocations();
}

}  // namespace

TEST(PagedKVCache, WarmDecodeAllocatesNothing) {
  for (const char* spec : {"fp16", "tq_mse:b=3", "tq_prod:b=3|tq_mse:b=3", "tq_mse:b=2.5|tq_mse:b=3",
                           "rotate:tq_mse:b=3|center:tq_mse:b=3", "center:tq_prod:b=3|rotate:center:tq_mse:b=4"})
    for (size_t threads : {1, 2})
      for (size_t batch : {1, 3})
        // The fused integer kernels, and the separate score and sum kernels (float arithmetic, and
        // the path of CPUs without the integer kernels).
        for (Arithmetic arithmetic : {Arithmetic::kInteger, Arithmetic::kFloat}) {
          SCOPED_TRACE(std::string(spec) + " threads " + std::to_string(threads) + " batch " + std::to_string(batch) +
                       (arithmetic == Arithmetic::kFloat ? " float" : " integer"));
          EXPECT_EQ(warm_decode_allocations(spec, threads, batch, arithmetic), 0u);
        }
}

// Which thread runs which task is the executor's choice: memory a call needs belongs to its steps,
// not to the threads that happened to run them before.
TEST(PagedKVCache, WarmDecodeAllocatesNothingOnAThreadNewToIt) {
  for (const char* spec : {"fp16", "tq_mse:b=3", "tq_prod:b=3|tq_mse:b=3", "tq_mse:b=2.5|tq_mse:b=3",
                           "rotate:tq_mse:b=3|center:tq_mse:b=3", "center:tq_prod:b=3|rotate:center:tq_mse:b=4"})
    for (Arithmetic arithmetic : {Arithmetic::kInteger, Arithmetic::kFloat}) {
      SCOPED_TRACE(std::string(spec) + (arithmetic == Arithmetic::kFloat ? " float" : " integer"));
      EXPECT_EQ(warm_decode_allocations(spec, 1, 3, arithmetic, true), 0u);
    }
}

}  // namespace kvsketch
