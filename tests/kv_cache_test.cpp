#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <utility>

#include "cache/row_packing.hpp"
#include "core/require.hpp"
#include "kvsketch/attention.hpp"
#include "kvsketch/kv_cache.hpp"
#include "simd/int_index_kernels.hpp"
#include "test_util.hpp"

namespace kvsketch {
namespace {

// [kv_heads][tokens][dim] slices of a [kv_heads][total][dim] tensor.
std::vector<float> slice(const std::vector<float>& x, size_t heads, size_t total, size_t dim, size_t first,
                         size_t count) {
  std::vector<float> out;
  for (size_t h = 0; h < heads; ++h)
    out.insert(out.end(), x.begin() + static_cast<std::ptrdiff_t>((h * total + first) * dim),
               x.begin() + static_cast<std::ptrdiff_t>((h * total + first + count) * dim));
  return out;
}

void expect_same_contents(const KVCache& a, const KVCache& b) {
  for (size_t l = 0; l < a.layers(); ++l)
    for (size_t h = 0; h < a.kv_heads(); ++h) {
      const HeadCache &x = a.head(l, h), &y = b.head(l, h);
      EXPECT_EQ(x.sink_keys, y.sink_keys);
      EXPECT_EQ(x.sink_values, y.sink_values);
      EXPECT_EQ(x.window_keys, y.window_keys);
      EXPECT_EQ(x.window_values, y.window_values);
      EXPECT_EQ(x.body_keys.data(), y.body_keys.data());
      EXPECT_EQ(x.body_values.data(), y.body_values.data());
      EXPECT_EQ(a.key_codec(l, h).calibration(), b.key_codec(l, h).calibration());
      EXPECT_EQ(a.value_codec(l, h).calibration(), b.value_codec(l, h).calibration());
    }
}

TEST(KVPolicy, ParsesAndPrintsCanonically) {
  const KVPolicy p = KVPolicy::parse("tq_prod:b=3|tq_mse:b=3|sinks=2|window=64|layer0=fp16");
  EXPECT_EQ(p.codecs.key, "tq_prod:b=3");
  EXPECT_EQ(p.codecs.value, "tq_mse:b=3");
  EXPECT_EQ(p.sinks, 2u);
  EXPECT_EQ(p.window, 64u);
  EXPECT_EQ(p.codecs_for(0).key, "fp16");
  EXPECT_EQ(p.codecs_for(1).value, "tq_mse:b=3");
  EXPECT_EQ(KVPolicy::parse(p.spec()).spec(), p.spec());
  const KVPolicy single = KVPolicy::parse("int8");
  EXPECT_EQ(single.codecs.key, "int8");
  EXPECT_EQ(single.codecs.value, "int8");
  EXPECT_EQ(single.sinks, 4u);
  EXPECT_EQ(single.window, 128u);
}

TEST(KVPolicy, BadSpecsNameTheProblem) {
  auto message = [](const std::string& spec) { return testutil::error_of([&] { KVPolicy::parse(spec); }); };
  EXPECT_NE(message("nope:b=3").find("unknown codec 'nope'"), std::string::npos);
  EXPECT_NE(message("fp16|sinks=x").find("sinks must be an integer"), std::string::npos);
  EXPECT_NE(message("fp16|int8|int8").find("expected KEYCODEC"), std::string::npos);
  EXPECT_NE(message("fp16|block=0").find("block must be in 1.."), std::string::npos);
  EXPECT_NE(message("tq_mse:b=9").find("b"), std::string::npos);
  EXPECT_THROW(KVCache(2, 1, 64, KVPolicy::parse("fp16|layer5=int8")), Error);
  // A split in absolute channel counts parses, and is checked against the cache's head_dim.
  const KVPolicy explicit_split = KVPolicy::parse("split:tq_mse:b=3@32+tq_mse:b=2@96|center:split:tq_mse:b=3@32+tq_mse:b=2@96");
  EXPECT_EQ(KVCache(1, 1, 128, explicit_split).key_codec(0, 0).code_bytes(),
            KVCache(1, 1, 128, KVPolicy::parse("tq_mse:b=2.5")).key_codec(0, 0).code_bytes());
  try {
    KVCache(1, 1, 64, explicit_split);
    FAIL() << "a 128-channel split accepted at head_dim 64";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the parts have 128 channels in all, the dimension is 64"), std::string::npos)
        << e.what();
  }
  EXPECT_NE(message("split:tq_mse:b=3@32+tq_mse:b=9@96").find("b"), std::string::npos);
}

TEST(KVCache, StreamingEqualsOneBlock) {
  // Codecs with outlier channels pick them from the same first tokens however the tokens come.
  for (const char* spec : {"tq_prod:b=3|tq_mse:b=3|window=100|block=16", "kivi:b=2,group=16|window=100|block=16",
                           "tq_mse:b=2.5|tq_prod:b=3.5|window=100|block=16",
                           "qjl:m=128,outliers=8|tq_mse:b=3,rescale=1|window=100|block=16"}) {
  SCOPED_TRACE(spec);
  const size_t heads = 2, dim = 80, total = 700;
  auto keys = testutil::gaussian_matrix(heads * total, dim, 1);
  const auto values = testutil::gaussian_matrix(heads * total, dim, 2);
  for (size_t i = 0; i < heads * total; ++i) keys[i * dim + 11] *= 8.0f;  // an outlier channel
  const KVPolicy policy = KVPolicy::parse(spec);
  KVCache batch(1, heads, dim, policy, 5), streamed(1, heads, dim, policy, 5), chunked(1, heads, dim, policy, 5);
  batch.append(0, keys.data(), values.data(), total);
  for (size_t t = 0; t < total; ++t)
    streamed.append(0, slice(keys, heads, total, dim, t, 1).data(), slice(values, heads, total, dim, t, 1).data(), 1);
  for (size_t t = 0, step = 1; t < total; t += step, step = step * 3 % 97 + 1) {
    const size_t count = std::min(step, total - t);
    chunked.append(0, slice(keys, heads, total, dim, t, count).data(), slice(values, heads, total, dim, t, count).data(),
                   count);
  }
  expect_same_contents(batch, streamed);
  expect_same_contents(batch, chunked);
  const HeadCache& head = batch.head(0, 1);
  EXPECT_EQ(head.sink_count, 4u);
  EXPECT_GE(head.window_count, 100u);
  EXPECT_LT(head.window_count, 116u);
  EXPECT_EQ(head.tokens(), total);
  EXPECT_EQ(head.body_count() % 16, 0u);
  }
}

// Same seed, same bits on every machine: a cache built on each SIMD target holds the same bytes
// (codes, calibration, fp16 sinks and window). Highway's emulated fp16 conversion on the targets
// without F16C truncated where F16C rounds, so their windows differed before float_to_half_row
// converted there as float_to_half does.
std::string saved_bytes(const KVCache& cache, const std::string& name) {
  const std::string path = testing::TempDir() + name;
  cache.save(path);
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The codes are the same on every target; under the automatic packing their rows may lie in quads
// on one and not another, but the saved files are the same bytes.
TEST(KVCache, EveryTargetHoldsTheSameBytes) {
  for (const char* spec : {"fp16|window=100|block=16",
                           "tq_mse:b=2.5|center:tq_mse:b=2.5,rescale=1|window=100|block=16",
                           "tq_prod:b=3|tq_mse:b=3|window=100|block=16",
                           "qjl:m=128,outliers=8|tq_prod:b=3.5|window=100|block=16",
                           "kivi:b=2,group=16|window=100|block=16", "q4_0|int8|window=100|block=16",
                           "rotate:q4_0|rotate:int8|window=100|block=16"}) {
    SCOPED_TRACE(spec);
    const size_t dim = 80, total = 400;
    auto keys = testutil::gaussian_matrix(total, dim, 1, 3.0);
    const auto values = testutil::gaussian_matrix(total, dim, 2, 0.7);
    for (size_t i = 0; i < total; ++i) keys[i * dim + 11] += 20.0f;  // an outlier channel
    std::unique_ptr<KVCache> first;
    std::string first_file;
    testutil::for_each_target([&] {
      auto cache = std::make_unique<KVCache>(1, 1, dim, KVPolicy::parse(spec), 5);
      cache->append(0, keys.data(), values.data(), 300);
      for (size_t t = 300; t < total; ++t) cache->append(0, keys.data() + t * dim, values.data() + t * dim, 1);
      const std::string file = saved_bytes(*cache, "kvsketch_every_target.kvc");
      if (!first) {
        first = std::move(cache);
        first_file = file;
        return;
      }
      EXPECT_TRUE(file == first_file);
      if (rows_in_quads(first->key_codec(0, 0)) == rows_in_quads(cache->key_codec(0, 0)) &&
          rows_in_quads(first->value_codec(0, 0)) == rows_in_quads(cache->value_codec(0, 0)))
        expect_same_contents(*first, *cache);
    });
  }
}

// Rows packed in quads and plain rows are the same codes in the same bytes and answer alike to the
// bit, and their files are the same bytes; the automatic packing takes quads exactly where the
// fused kernel reads them in place. The packing is not part of any spec.
TEST(KVCache, RowPackingsHoldTheSameCodes) {
  const size_t layers = 2, heads = 2, dim = 96, total = 700, query_heads = 8;
  const auto keys = testutil::gaussian_matrix(heads * total, dim, 4, 2.0);
  const auto values = testutil::gaussian_matrix(heads * total, dim, 5);
  const auto queries = testutil::gaussian_matrix(query_heads, dim, 6);
  const std::string policy = "tq_prod:b=3|tq_mse:b=2.5|layer1=center:tq_mse:b=3/tq_mse:b=4|window=64|block=32";
  std::vector<std::unique_ptr<KVCache>> caches;
  for (const RowPacking packing : {RowPacking::kPlain, RowPacking::kQuads, RowPacking::kAuto}) {
    const ScopedRowPacking scope(packing);
    auto& cache = caches.emplace_back(std::make_unique<KVCache>(layers, heads, dim, KVPolicy::parse(policy), 3));
    for (size_t layer = 0; layer < layers; ++layer) cache->append(layer, keys.data(), values.data(), total);
  }
  const KVCache &plain = *caches[0], &quads = *caches[1], &automatic = *caches[2];
  EXPECT_TRUE(rows_in_quads(quads.key_codec(1, 1)));
  EXPECT_FALSE(rows_in_quads(plain.key_codec(1, 1)));
  EXPECT_EQ(quads.key_codec(1, 1).spec(), plain.key_codec(1, 1).spec());
  EXPECT_EQ(plain.key_codec(1, 1).spec().rfind("center:tq_mse:b=3,", 0), 0u);
  EXPECT_EQ(quads.policy().spec(), plain.policy().spec());
  EXPECT_EQ(quads.bytes(), plain.bytes());
  EXPECT_EQ(quads.head(0, 1).body_count(), plain.head(0, 1).body_count());
  EXPECT_NE(quads.head(0, 1).body_keys.data(), plain.head(0, 1).body_keys.data());
  for (size_t layer = 0; layer < layers; ++layer) {
    const auto expected = decode_attention_layer(plain, layer, queries.data(), query_heads);
    for (const KVCache* cache : {&quads, &automatic}) {
      const auto got = decode_attention_layer(*cache, layer, queries.data(), query_heads);
      EXPECT_EQ(got.output, expected.output);
      EXPECT_EQ(got.lse, expected.lse);
    }
  }
  // Files: plain rows either way, the same bytes; read back in this thread's packing.
  const std::string plain_file = saved_bytes(plain, "kvsketch_plain.kvc");
  EXPECT_TRUE(saved_bytes(quads, "kvsketch_quads.kvc") == plain_file);
  const ScopedRowPacking scope(RowPacking::kQuads);
  const KVCache loaded = KVCache::load(testing::TempDir() + "kvsketch_plain.kvc");
  EXPECT_TRUE(rows_in_quads(loaded.key_codec(0, 0)));
  expect_same_contents(quads, loaded);
  // auto: quads where both codecs are read in place (AVX3_DL; dim 96 = 24 + 72 channels for
  // tq_mse:b=2.5, whose 24 are not whole pairs of octets: plain there).
  for (size_t layer = 0; layer < layers; ++layer) {
    const bool in_quads = rows_in_quads(automatic.key_codec(layer, 0));
    EXPECT_EQ(rows_in_quads(automatic.value_codec(layer, 0)), in_quads);
    const float table[8] = {};
    simd::RowSource rows{simd::RowFormat::kIndex, nullptr, 1, dim, 3, table};
    EXPECT_EQ(in_quads, layer == 1 && simd::int_index_reads_quads(rows)) << layer;
  }
}

TEST(KVPolicy, LayoutFieldIsReadAndIgnored) {
  // Older specs and files carry layout=: the same policy as without it.
  EXPECT_EQ(KVPolicy::parse("tq_mse:b=3|layout=quads").spec(), KVPolicy::parse("tq_mse:b=3").spec());
  EXPECT_EQ(KVPolicy::parse("tq_mse:b=3|layout=auto|window=8").spec(), "tq_mse:b=3|tq_mse:b=3|sinks=4|window=8|block=32");
  EXPECT_EQ(KVPolicy::parse("tq_mse:b=3").spec().find("layout"), std::string::npos);
  EXPECT_NE(testutil::error_of([] { KVPolicy::parse("tq_mse:b=3|layout=rows"); }).find("auto, plain or quads"),
            std::string::npos);
  EXPECT_NE(testutil::error_of([] { KVPolicy::parse("tq_mse:b=3|layout=plain|layout=plain"); }).find("given twice"),
            std::string::npos);
  // Quads need blocks of whole quads: other blocks keep plain rows, whatever the packing asked.
  const ScopedRowPacking scope(RowPacking::kQuads);
  EXPECT_FALSE(rows_in_quads(KVCache(1, 1, 64, KVPolicy::parse("tq_mse:b=3|block=6")).key_codec(0, 0)));
  EXPECT_TRUE(rows_in_quads(KVCache(1, 1, 64, KVPolicy::parse("tq_mse:b=3|block=8")).key_codec(0, 0)));
}

TEST(KVPolicy, PackingFromTheEnvironment) {
  ASSERT_EQ(setenv("KVSKETCH_PACKING", "plain", 1), 0);
  EXPECT_EQ(current_row_packing(), RowPacking::kPlain);
  EXPECT_FALSE(rows_in_quads(KVCache(1, 1, 64, KVPolicy::parse("tq_mse:b=3")).key_codec(0, 0)));
  ASSERT_EQ(setenv("KVSKETCH_PACKING", "quads", 1), 0);
  EXPECT_TRUE(rows_in_quads(KVCache(1, 1, 64, KVPolicy::parse("tq_mse:b=3")).key_codec(0, 0)));
  {
    const ScopedRowPacking scope(RowPacking::kPlain);  // a scope comes first
    EXPECT_EQ(current_row_packing(), RowPacking::kPlain);
  }
  ASSERT_EQ(setenv("KVSKETCH_PACKING", "rows", 1), 0);
  EXPECT_NE(testutil::error_of([] { KVCache(1, 1, 64, KVPolicy::parse("tq_mse:b=3")); }).find("KVSKETCH_PACKING=rows"),
            std::string::npos);
  ASSERT_EQ(unsetenv("KVSKETCH_PACKING"), 0);
  EXPECT_EQ(current_row_packing(), RowPacking::kAuto);
}

TEST(KVPolicy, KiviNamesItsKeyAndValueCodecs) {
  const KVPolicy p = KVPolicy::parse("kivi:b=2,group=32|layer1=kivi:b=4/fp16");
  EXPECT_EQ(p.codecs.key, "kivi_k:b=2,group=32");
  EXPECT_EQ(p.codecs.value, "kivi_v:b=2,group=32");
  EXPECT_EQ(p.codecs_for(1).key, "kivi_k:b=4");
  EXPECT_EQ(p.codecs_for(1).value, "fp16");
  // KIVI keys share scales over a group of tokens: the block that leaves the window must hold whole groups.
  EXPECT_THROW(KVCache(1, 1, 64, KVPolicy::parse("kivi:b=2,group=32|block=16")), Error);
}

TEST(KVCache, BytesAreWhatIsHeld) {
  const size_t heads = 2, dim = 128, total = 1000;
  const auto keys = testutil::gaussian_matrix(heads * total, dim, 3);
  KVCache fp16(2, heads, dim, KVPolicy::parse("fp16"), 1);
  KVCache tq(2, heads, dim, KVPolicy::parse("tq_prod:b=3|tq_mse:b=3|layer0=fp16"), 1);
  for (size_t layer = 0; layer < 2; ++layer) {
    fp16.append(layer, keys.data(), keys.data(), total);
    tq.append(layer, keys.data(), keys.data(), total);
  }
  EXPECT_EQ(fp16.bytes(), 2 * heads * total * dim * 2 * 2);
  EXPECT_DOUBLE_EQ(fp16.bits_per_value(), 16.0);
  // Layer 1: sinks and window in fp16, the body in codes of exactly code_bytes() each.
  const HeadCache& head = tq.head(1, 0);
  const size_t expected = 2 * 2 * dim * (head.sink_count + head.window_count) +
                          head.body_count() * (tq.key_codec(1, 0).code_bytes() + tq.value_codec(1, 0).code_bytes());
  EXPECT_EQ(tq.bytes(1, 0), expected);
  EXPECT_EQ(tq.bytes(0), fp16.bytes(0));
  EXPECT_EQ(tq.bytes(), tq.bytes(0) + tq.bytes(1));
  EXPECT_GE(tq.allocated_bytes(), tq.bytes());
  tq.shrink_to_fit();
  EXPECT_EQ(tq.allocated_bytes(), tq.bytes());
  // tq_prod:b=3 keys at d=128: 32 + 16 bytes of codes + two fp16 norms; tq_mse:b=3 values: 48 + 2.
  EXPECT_EQ(tq.key_codec(1, 0).code_bytes(), 52u);
  EXPECT_EQ(tq.value_codec(1, 0).code_bytes(), 50u);

  // An outlier split also holds its channel lists: 32 u16 per codec and head.
  KVCache split(1, heads, dim, KVPolicy::parse("tq_mse:b=2.5|tq_mse:b=3.5"), 1);
  split.append(0, keys.data(), keys.data(), total);
  split.shrink_to_fit();
  const HeadCache& s = split.head(0, 1);
  EXPECT_EQ(split.calibration_bytes(0, 1), 2u * 32 * 2);
  EXPECT_EQ(split.bytes(0, 1), 2 * 2 * dim * (s.sink_count + s.window_count) + s.body_count() * (40 + 56) + 128);
  EXPECT_EQ(split.allocated_bytes(), split.bytes());
}

TEST(KVCache, RefusedAppendNamesThePlaceAndChangesNothing) {
  const size_t heads = 3, dim = 64, total = 300;
  auto keys = testutil::gaussian_matrix(heads * total, dim, 4);
  auto values = testutil::gaussian_matrix(heads * total, dim, 5);
  KVCache cache(2, heads, dim, KVPolicy::parse("tq_mse:b=2|window=32|block=8"), 1);
  cache.append(1, keys.data(), values.data(), 100);
  const size_t bytes = cache.bytes();
  values[(2 * total + 250) * dim + 7] = NAN;
  try {
    cache.append(1, keys.data(), values.data(), total);
    FAIL() << "NaN accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("values of layer 1, kv head 2, token 250 (position 350), channel 7"),
              std::string::npos)
        << e.what();
  }
  values[(2 * total + 250) * dim + 7] = 1e6f;  // beyond fp16
  EXPECT_THROW(cache.append(1, keys.data(), values.data(), total), Error);
  EXPECT_THROW(cache.append(2, keys.data(), values.data(), 1), Error);
  EXPECT_EQ(cache.bytes(), bytes);
  EXPECT_EQ(cache.tokens(1), 100u);

  // A norm beyond the codec's fp16 norm fails inside encoding: the cache is rolled back.
  KVCache narrow(1, 1, 256, KVPolicy::parse("tq_mse:b=2|window=4|block=4|sinks=0"), 1);
  std::vector<float> big(256 * 16, 60000.0f);
  EXPECT_THROW(narrow.append(0, big.data(), big.data(), 16), Error);
  EXPECT_EQ(narrow.tokens(0), 0u);
  EXPECT_EQ(narrow.bytes(), 0u);
  // Head 0 encodes (its window loses its front), then head 1 fails: both heads are as before.
  KVCache two(1, 2, 256, KVPolicy::parse("tq_mse:b=2|window=4|block=4|sinks=0"), 1);
  const auto small = testutil::gaussian_matrix(2 * 6, 256, 7);
  two.append(0, small.data(), small.data(), 6);
  const HeadCache first = two.head(0, 0);
  auto mixed = testutil::gaussian_matrix(2 * 16, 256, 8);
  std::fill(mixed.begin() + 16 * 256, mixed.end(), 60000.0f);
  EXPECT_THROW(two.append(0, mixed.data(), mixed.data(), 16), Error);
  EXPECT_EQ(two.head(0, 0).window_keys, first.window_keys);
  EXPECT_EQ(two.head(0, 0).window_values, first.window_values);
  EXPECT_EQ(two.head(0, 0).body_count(), 0u);
  EXPECT_EQ(two.tokens(0), 6u);
  // The same for a codec that calibrates on its first encode: the choice is undone too.
  const KVPolicy split_policy = KVPolicy::parse("tq_mse:b=2.5|window=4|block=4|sinks=0");
  KVCache split(1, 1, 256, split_policy, 1);
  const auto initial = split.key_codec(0, 0).calibration();
  for (size_t i = 0; i < 16; ++i) big[i * 256 + 5] = 1.0f;  // channel 5 quiet: calibration would move it
  EXPECT_THROW(split.append(0, big.data(), big.data(), 16), Error);
  EXPECT_EQ(split.key_codec(0, 0).calibration(), initial);
  EXPECT_EQ(split.bytes(), KVCache(1, 1, 256, split_policy, 1).bytes());
}

TEST(KVCacheFile, RoundTripIsBitExactAndCorruptFilesAreRefused) {
  const size_t heads = 2, dim = 64, total = 300;
  auto keys = testutil::gaussian_matrix(heads * total, dim, 1);
  const auto values = testutil::gaussian_matrix(heads * total, dim, 2);
  for (size_t i = 0; i < heads * total; ++i) keys[i * dim + 50] *= 8.0f;  // calibration moves channel 50
  KVCache cache(2, heads, dim, KVPolicy::parse("tq_prod:b=2.5|kivi:b=2|window=64|block=32|layer1=q4_0/tq_mse:b=3.5"),
                9);
  cache.append(0, keys.data(), values.data(), total);
  cache.append(1, keys.data(), values.data(), total - 7);
  const std::string path = testing::TempDir() + "kvsketch_cache_roundtrip.kvc";
  cache.save(path);
  const KVCache loaded = KVCache::load(path);
  EXPECT_EQ(loaded.policy().spec(), cache.policy().spec());
  EXPECT_EQ(loaded.seed(), cache.seed());
  EXPECT_EQ(loaded.bytes(), cache.bytes());
  expect_same_contents(cache, loaded);
  // The codecs are rebuilt identically: attention over the loaded cache is the same to the bit.
  const auto queries = testutil::gaussian_matrix(2 * heads, dim, 3);
  for (size_t layer = 0; layer < 2; ++layer) {
    const auto a = decode_attention_layer(cache, layer, queries.data(), 2 * heads);
    const auto b = decode_attention_layer(loaded, layer, queries.data(), 2 * heads);
    EXPECT_EQ(a.output, b.output);
    EXPECT_EQ(a.lse, b.lse);
  }
  // And it keeps streaming the same way.
  KVCache continued = KVCache::load(path);
  cache.append(1, keys.data(), values.data(), 1);
  continued.append(1, keys.data(), values.data(), 1);
  expect_same_contents(cache, continued);

  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto write = [&](const std::string& name, const std::string& content) {
    const std::string p = testing::TempDir() + name;
    std::ofstream(p, std::ios::binary) << content;
    return p;
  };
  for (size_t keep : {size_t{0}, size_t{10}, size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
    SCOPED_TRACE(keep);
    EXPECT_THROW(KVCache::load(write("kvsketch_truncated.kvc", bytes.substr(0, keep))), Error);
  }
  for (size_t at : {size_t{3}, size_t{40}, bytes.size() / 3, bytes.size() - 20}) {
    std::string flipped = bytes;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x10);
    try {
      KVCache::load(write("kvsketch_flipped.kvc", flipped));
      ADD_FAILURE() << "a flipped byte at " << at << " was accepted";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_TRUE(message.find("corrupted") != std::string::npos || message.find("magic") != std::string::npos)
          << message;
    }
  }
  EXPECT_THROW(KVCache::load(write("kvsketch_extra.kvc", bytes + "x")), Error);
  // Headers whose checksum holds but whose counts the file cannot back: refused before anything of
  // their size is allocated (4096 x 4096 heads took 24 GB before the check).
  const auto resealed = [&](size_t at, uint64_t value) {
    return write("kvsketch_resealed.kvc", testutil::resealed(bytes, at, value));
  };
  const size_t layers_at = 24, kv_heads_at = 32;
  EXPECT_EQ(KVCache::load(resealed(layers_at, 2)).bytes(), loaded.bytes());  // its own layer count: loads
  for (const auto& [at, value] : {std::pair<size_t, uint64_t>{layers_at, 4096}, {kv_heads_at, 4096},
                                  {kv_heads_at, uint64_t{1} << 62}, {layers_at, ~uint64_t{0}}}) {
    SCOPED_TRACE(testing::Message() << "field at " << at << " = " << value);
    const std::string message = testutil::error_of([&, at = at, value = value] { KVCache::load(resealed(at, value)); });
    EXPECT_TRUE(message.find("heads claimed") != std::string::npos) << message;
  }
  // An fp16 +Inf as head 0's first sink key (after the header, the policy text and the head's
  // three counts), checksum resealed: refused, as append() would refuse it.
  uint64_t policy_length = 0, first_sink = 0;
  std::memcpy(&policy_length, bytes.data() + 56, 8);
  const size_t sink_at = 64 + policy_length + 24;
  std::memcpy(&first_sink, bytes.data() + sink_at, 8);
  const uint64_t with_inf = (first_sink & ~uint64_t{0xFFFF}) | 0x7C00;
  const std::string infinite = testutil::error_of([&] { KVCache::load(resealed(sink_at, with_inf)); });
  EXPECT_NE(infinite.find("head 0 holds a NaN or Inf fp16 value"), std::string::npos) << infinite;
  EXPECT_THROW(KVCache::load(testing::TempDir() + "kvsketch_no_such_file.kvc"), Error);
  EXPECT_THROW(cache.save("/nonexistent-directory/cache.kvc"), Error);
}

}  // namespace
}  // namespace kvsketch
