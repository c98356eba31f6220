// IvfIndex: recall against exact search on clustered data for each metric, more lists probed
// finding more, fast-scan lists as the row layout, refine stores, merged shards as one index, the
// same bits for any thread count and after save/load, and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "ann/log_norm.hpp"
#include "kvsketch/error.hpp"
#include "kvsketch/ivf_index.hpp"
#include "test_util.hpp"

namespace kvsketch {
namespace {

constexpr size_t kDim = 32;

// n rows around 40 Gaussian centres, as embeddings cluster.
std::vector<float> clustered(size_t n, uint64_t seed) {
  const std::vector<float> centres = testutil::gaussian_matrix(40, kDim, seed, 3.0);
  std::vector<float> x = testutil::gaussian_matrix(n, kDim, seed + 1);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < kDim; ++j) x[i * kDim + j] += centres[(i * 7919 % 40) * kDim + j];
  return x;
}

double similarity(const float* a, const float* b, Metric metric) {
  double dot = 0.0, na = 0.0, nb = 0.0, l2 = 0.0;
  for (size_t j = 0; j < kDim; ++j) {
    dot += static_cast<double>(a[j]) * b[j];
    na += static_cast<double>(a[j]) * a[j];
    nb += static_cast<double>(b[j]) * b[j];
    l2 += (static_cast<double>(a[j]) - b[j]) * (static_cast<double>(a[j]) - b[j]);
  }
  if (metric == Metric::kCosine) return dot / std::sqrt(na * nb);
  return metric == Metric::kL2 ? -l2 : dot;
}

// recall@k of `found` against exact search over x (ids = row numbers).
double recall(const Neighbors& found, const std::vector<float>& x, const std::vector<float>& queries, size_t k,
              Metric metric) {
  const size_t n = x.size() / kDim, nq = queries.size() / kDim;
  double hits = 0.0;
  for (size_t q = 0; q < nq; ++q) {
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t{0});
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), [&](size_t a, size_t b) {
      return similarity(queries.data() + q * kDim, x.data() + a * kDim, metric) >
             similarity(queries.data() + q * kDim, x.data() + b * kDim, metric);
    });
    const std::set<int64_t> truth(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k));
    for (size_t r = 0; r < k; ++r) hits += truth.count(found.id(q, r));
  }
  return hits / static_cast<double>(nq * k);
}

IvfIndex trained_index(const std::string& factory, const std::vector<float>& x) {
  IvfIndex index(kDim, IvfIndexOptions::parse(factory));
  index.train(x.data(), x.size() / kDim);
  index.add(x.data(), x.size() / kDim);
  return index;
}

TEST(IvfIndex, RecallAgainstExactSearchForEachMetric) {
  const std::vector<float> x = clustered(4000, 1), queries = clustered(50, 2);
  for (const auto& [metric, name] : {std::pair{Metric::kInnerProduct, "ip"}, std::pair{Metric::kCosine, "cosine"},
                                     std::pair{Metric::kL2, "l2"}}) {
    const IvfIndex index =
        trained_index(std::string("ivf:nlist=40,nprobe=8,metric=") + name + "|tq_mse:b=4,rescale=1", x);
    EXPECT_EQ(index.size(), 4000u);
    const double few = recall(index.search(queries.data(), 50, 10, 2), x, queries, 10, metric);
    const double some = recall(index.search(queries.data(), 50, 10), x, queries, 10, metric);
    const double all = recall(index.search(queries.data(), 50, 10, 40), x, queries, 10, metric);
    std::printf("[ ivf      ] %s: recall@10 %.3f (nprobe 2), %.3f (8), %.3f (40 of 40)\n", name, few, some, all);
    EXPECT_GE(some, few);
    EXPECT_GE(all + 1e-9, some);
    EXPECT_GT(all, 0.85) << name;  // 4-bit codes: what a flat scan of them finds
    EXPECT_GT(some, 0.75) << name;
  }
}

TEST(IvfIndex, ResidualsAndPlainCodesBothFindNeighbours) {
  const std::vector<float> x = clustered(3000, 3), queries = clustered(40, 4);
  const IvfIndex residual = trained_index("ivf:nlist=30,nprobe=10,residual=1|tq_mse:b=3,rescale=1", x);
  const IvfIndex plain = trained_index("ivf:nlist=30,nprobe=10,residual=0|tq_mse:b=3,rescale=1", x);
  const double r = recall(residual.search(queries.data(), 40, 10), x, queries, 10, Metric::kInnerProduct);
  const double p = recall(plain.search(queries.data(), 40, 10), x, queries, 10, Metric::kInnerProduct);
  std::printf("[ ivf      ] 3-bit recall@10: residuals %.3f, plain %.3f\n", r, p);
  EXPECT_GT(r, 0.6);
  EXPECT_GT(p, 0.6);
}

TEST(IvfIndex, SameBitsOnAnyThreadCountAndAfterSaveAndLoad) {
  const std::vector<float> x = clustered(2000, 5), queries = clustered(30, 6);
  const IvfIndex one = trained_index("ivf:nlist=20,nprobe=5,metric=l2|tq_mse:b=4", x);
  IvfIndexOptions options = IvfIndexOptions::parse("ivf:nlist=20,nprobe=5,metric=l2|tq_mse:b=4");
  options.threads = 1;
  IvfIndex single(kDim, options);
  single.train(x.data(), 2000);
  single.add(x.data(), 2000);
  const Neighbors a = one.search(queries.data(), 30, 10), b = single.search(queries.data(), 30, 10);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.scores, b.scores);
  EXPECT_EQ(one.list_sizes(), single.list_sizes());
  const std::string path = testing::TempDir() + "/ivf_index_test.kvivf";
  one.save(path);
  const IvfIndex loaded = IvfIndex::load(path);
  const Neighbors c = loaded.search(queries.data(), 30, 10);
  EXPECT_EQ(a.ids, c.ids);
  EXPECT_EQ(a.scores, c.scores);
  EXPECT_EQ(loaded.bytes(), one.bytes());
  EXPECT_EQ(loaded.options().factory(), one.options().factory());
  // A byte flipped anywhere is caught by the checksum; a truncated file is refused.
  std::vector<char> bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (const size_t at : {size_t{40}, bytes.size() / 2, bytes.size() - 20}) {
    std::vector<char> corrupt = bytes;
    corrupt[at] = static_cast<char>(corrupt[at] ^ 0x10);
    std::ofstream(path, std::ios::binary).write(corrupt.data(), static_cast<std::streamsize>(corrupt.size()));
    EXPECT_THROW(IvfIndex::load(path), Error) << "byte " << at;
  }
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 3));
  EXPECT_THROW(IvfIndex::load(path), Error);
  std::remove(path.c_str());
}

// map: the lists' arrays stay in the file's pages (mapped_bytes), searches give load's bits, a
// list copies its arrays when it changes (then answers as a loaded index changed the same way),
// the mapping outlives the file's name, and damaged files are refused as by load.
TEST(IvfIndex, MappedIndexSearchesInPlaceAndCopiesOnChange) {
  const std::vector<float> x = clustered(2000, 21), queries = clustered(30, 22);
  const std::string path = testing::TempDir() + "/ivf_map_test.kvivf";
  for (const char* factory : {"ivf:nlist=20,nprobe=5,metric=l2,refine=int8|tq_mse:b=4",
                              "ivf:nlist=20,nprobe=5,norm=log8,refine=fp16|tq_mse:b=2,rescale=1",
                              "ivf:nlist=20,nprobe=5,fast_scan=0|int8"}) {
    IvfIndex built(kDim, IvfIndexOptions::parse(factory));
    built.train(x.data(), 2000);
    built.add(x.data(), 1500);
    built.save(path);
    IvfIndex loaded = IvfIndex::load(path);
    IvfIndex mapped = IvfIndex::map(path);
    EXPECT_EQ(loaded.mapped_bytes(), 0u);
    EXPECT_EQ(mapped.bytes(), loaded.bytes());
    // Everything but the centroids (and, in the row layout, the codes) stays in the file.
    const size_t centroids = (20 * kDim + 20) * 4 + (std::string(factory).find("log8") != std::string::npos ? 160 : 0);
    const size_t copied = std::string(factory).find("fast_scan=0") != std::string::npos ? 1500 * mapped.codec().code_bytes() : 0;
    EXPECT_EQ(mapped.mapped_bytes() + centroids + copied, mapped.bytes()) << factory;
    std::remove(path.c_str());  // the mapping keeps the pages
    const Neighbors a = loaded.search(queries.data(), 30, 10), b = mapped.search(queries.data(), 30, 10);
    EXPECT_EQ(a.ids, b.ids) << factory;
    EXPECT_EQ(a.scores, b.scores) << factory;
    // Changes copy the touched lists out of the mapping.
    const int64_t doomed[] = {3, 500, 1499};
    EXPECT_EQ(loaded.remove(doomed, 3), 3u);
    EXPECT_EQ(mapped.remove(doomed, 3), 3u);
    loaded.add(x.data() + 1500 * kDim, 500);
    mapped.add(x.data() + 1500 * kDim, 500);
    EXPECT_LT(mapped.mapped_bytes(), loaded.bytes() / 10) << "every list took rows and left the mapping";
    const Neighbors c = loaded.search(queries.data(), 30, 10), d = mapped.search(queries.data(), 30, 10);
    EXPECT_EQ(c.ids, d.ids) << factory;
    EXPECT_EQ(c.scores, d.scores) << factory;
    EXPECT_EQ(mapped.to_bytes(), loaded.to_bytes());
  }
  // Damage is refused as by load, naming the file.
  IvfIndex small(kDim, IvfIndexOptions::parse("ivf:nlist=4|tq_mse:b=4"));
  small.train(x.data(), 100);
  small.add(x.data(), 100);
  small.save(path);
  std::vector<char> bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::vector<char> corrupt = bytes;
  corrupt[bytes.size() / 2] = static_cast<char>(corrupt[bytes.size() / 2] ^ 1);
  std::ofstream(path, std::ios::binary).write(corrupt.data(), static_cast<std::streamsize>(corrupt.size()));
  EXPECT_THROW(IvfIndex::map(path), Error);
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  EXPECT_THROW(IvfIndex::map(path), Error);
  std::ofstream(path, std::ios::binary).close();
  EXPECT_THROW(IvfIndex::map(path), Error);  // empty
  std::remove(path.c_str());
  try {
    IvfIndex::map(path);
    ADD_FAILURE() << "a missing file was mapped";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
  }
}

TEST(IvfIndex, IdsRemovalAndBytes) {
  const std::vector<float> x = clustered(500, 7);
  IvfIndex index(kDim, IvfIndexOptions::parse("ivf:nlist=10,nprobe=10,metric=l2|tq_mse:b=4"));
  index.train(x.data(), 500);
  std::vector<int64_t> ids(200);
  for (size_t i = 0; i < 200; ++i) ids[i] = static_cast<int64_t>(1000 + 2 * i);
  index.add(x.data(), 200, ids.data());
  index.add(x.data() + 200 * kDim, 300);  // defaults continue past the largest id: 1399, 1400, ...
  EXPECT_EQ(index.size(), 500u);
  const Neighbors self = index.search(x.data() + 250 * kDim, 1, 1);
  EXPECT_EQ(self.id(0, 0), 1399 + 50);
  const int64_t doomed[] = {1000, 1002, 1449, 77};
  EXPECT_EQ(index.remove(doomed, 4), 3u);
  EXPECT_EQ(index.size(), 497u);
  const Neighbors after = index.search(x.data(), 100, 20);
  for (int64_t id : after.ids) EXPECT_TRUE(id != 1000 && id != 1002 && id != 1449);
  // Bytes: codes, ids and fp16 norms per vector, the centroids and their squared norms once, and
  // the zero rows that pad each list's last fast-scan block to 32 (16 index bytes here).
  EXPECT_EQ(index.bytes_per_vector(), index.codec().code_bytes() + 8 + 2);
  size_t listed = 0, padding = 0;
  for (size_t n : index.list_sizes()) {
    listed += n;
    padding += (32 - n % 32) % 32 * 16;
  }
  EXPECT_EQ(listed, 497u);
  EXPECT_EQ(index.bytes(), 497 * index.bytes_per_vector() + padding + (10 * kDim + 10) * 4);
  // In the row layout, and with a refine store: exactly what is held.
  IvfIndex rows(kDim, IvfIndexOptions::parse("ivf:nlist=10,nprobe=10,metric=l2,fast_scan=0,refine=int8|tq_mse:b=4"));
  rows.train(x.data(), 500);
  rows.add(x.data(), 500);
  EXPECT_EQ(rows.bytes_per_vector(), rows.codec().code_bytes() + 8 + 2 + kDim + 4);
  EXPECT_EQ(rows.bytes(), 500 * rows.bytes_per_vector() + (10 * kDim + 10) * 4);
  EXPECT_EQ(rows.remove(doomed, 4), 1u);  // only 77 is present here
  EXPECT_EQ(rows.bytes(), 499 * rows.bytes_per_vector() + (10 * kDim + 10) * 4);
}

// The fast-scan lists rank as the row layout does: the integer scan only picks the shortlist that
// the codec's float estimate re-scores.
TEST(IvfIndex, FastScanListsFindWhatTheRowLayoutFinds) {
  const std::vector<float> x = clustered(4000, 11), queries = clustered(60, 12);
  for (const char* codec : {"tq_mse:b=4,rescale=1", "tq_mse:b=2,rescale=1", "tq_mse:b=1"}) {
    const std::string head = "ivf:nlist=40,nprobe=8,metric=l2";
    const IvfIndex fast = trained_index(head + "|" + codec, x);
    const IvfIndex rows = trained_index(head + ",fast_scan=0|" + codec, x);
    const Neighbors a = fast.search(queries.data(), 60, 10), b = rows.search(queries.data(), 60, 10);
    size_t same = 0;
    for (size_t q = 0; q < 60; ++q) {
      const std::set<int64_t> expected(b.ids.begin() + q * 10, b.ids.begin() + q * 10 + 10);
      for (size_t r = 0; r < 10; ++r) same += expected.count(a.id(q, r));
    }
    const double ra = recall(a, x, queries, 10, Metric::kL2), rb = recall(b, x, queries, 10, Metric::kL2);
    std::printf("[ ivf      ] %s: recall@10 fast scan %.3f, row layout %.3f, same ids %.3f\n", codec, ra, rb,
                same / 600.0);
    EXPECT_GE(same, 594u) << codec;  // 99%: only float rounding of the estimates differs
    EXPECT_NEAR(ra, rb, 0.01) << codec;
  }
}

// The byte code itself, at each resolution: every code decodes to a value that encodes back to it,
// values land within half a step of their decoded value, 0 stays 0, and the ends clamp. A list's
// scale takes the finest steps whose half range holds its norms.
TEST(IvfIndex, LogNormCodeRoundTripsWithinHalfAStep) {
  for (const uint32_t steps : {16u, 32u, 64u, 128u})
    for (const float reference : {1.0f, 0.37f, 1234.5f}) {
      const log_norm::Scale scale{reference, steps};
      ASSERT_TRUE(log_norm::valid(scale));
      for (int q = 1; q < 256; ++q)
        ASSERT_EQ(log_norm::encode(log_norm::decode(static_cast<uint8_t>(q), scale), scale), q) << q << " " << steps;
      const double half_step = std::exp2(0.5 / steps) - 1.0, range = std::exp2(127.0 / steps);
      for (double ratio = 1.0 / range; ratio < range; ratio *= 1.0 + 0.37 / steps) {
        const float value = static_cast<float>(ratio * reference);
        const float back = log_norm::decode(log_norm::encode(value, scale), scale);
        ASSERT_NEAR(back / value, 1.0, half_step + 1e-6) << value << " " << steps;
      }
      EXPECT_EQ(log_norm::encode(0.0f, scale), 0);
      EXPECT_EQ(log_norm::decode(0, scale), 0.0f);
      EXPECT_EQ(log_norm::encode(reference, scale), 128);
      EXPECT_EQ(log_norm::encode(reference * 1e6f, scale), 255);
      EXPECT_EQ(log_norm::encode(reference * 1e-6f, scale), 1);
    }
  EXPECT_FALSE(log_norm::valid({1.0f, 48}));
  EXPECT_FALSE(log_norm::valid({0.0f, 16}));
  // Scales: the median, and the finest steps holding the spread in 63 codes either side.
  const log_norm::Scale fallback{9.0f, 32};
  const float few[] = {0.0f, 3.0f, 1.0f, 2.0f, 0.0f};
  EXPECT_EQ(log_norm::scale_of(few, 5, fallback).reference, 2.0f);
  EXPECT_EQ(log_norm::scale_of(few, 5, fallback).steps, 32u);  // too few to judge the spread
  EXPECT_EQ(log_norm::scale_of(few, 1, fallback).reference, 9.0f);
  for (const auto& [spread, steps] : {std::pair{1.3f, 128u}, {1.9f, 64u}, {3.5f, 32u}, {40.0f, 16u}}) {
    std::vector<float> norms;
    for (int i = 0; i < 101; ++i) norms.push_back(std::pow(spread, (i - 50) / 50.0f));
    const log_norm::Scale scale = log_norm::scale_of(norms.data(), norms.size(), fallback);
    EXPECT_EQ(scale.steps, steps) << spread;
    EXPECT_NEAR(scale.reference, 1.0f, 1e-6f);
  }
}

// Log-coded norms: one byte per vector instead of the codec's fp16 norm, the ranking nearly
// unchanged (steps of 1-4% in the norm move a score far less than the codes' own error), the same
// bits after save and load, and each list's scale in bytes().
TEST(IvfIndex, LogCodedNormsSaveAByteAndKeepRecall) {
  const std::vector<float> x = clustered(4000, 15), queries = clustered(60, 16);
  for (const char* metric : {"ip", "l2"})
    for (const char* codec : {"tq_mse:b=2,rescale=1", "tq_mse:b=4", "tq_mse:b=1,norm=fp32"}) {
      const std::string head = std::string("ivf:nlist=40,nprobe=10,metric=") + metric;
      const IvfIndex plain = trained_index(head + "|" + codec, x);
      const IvfIndex coded = trained_index(head + ",norm=log8|" + codec, x);
      const size_t saved = std::string(codec).find("fp32") != std::string::npos ? 3 : 1;
      EXPECT_EQ(coded.bytes_per_vector() + saved, plain.bytes_per_vector()) << codec;
      // The same lists (the norms do not take part in training), 8 bytes per list for its scale.
      EXPECT_EQ(coded.list_sizes(), plain.list_sizes());
      EXPECT_EQ(coded.bytes() + 4000 * saved, plain.bytes() + 40 * 8) << codec;
      const Metric m = std::string(metric) == "l2" ? Metric::kL2 : Metric::kInnerProduct;
      const Neighbors a = plain.search(queries.data(), 60, 10), b = coded.search(queries.data(), 60, 10);
      const double ra = recall(a, x, queries, 10, m), rb = recall(b, x, queries, 10, m);
      size_t same = 0;
      for (size_t q = 0; q < 60; ++q) {
        const std::set<int64_t> expected(a.ids.begin() + q * 10, a.ids.begin() + q * 10 + 10);
        for (size_t r = 0; r < 10; ++r) same += expected.count(b.id(q, r));
      }
      std::printf("[ ivf      ] %s %s: recall@10 codec norms %.3f, log8 %.3f, same ids %.3f\n", metric, codec, ra, rb,
                  same / 600.0);
      EXPECT_NEAR(ra, rb, 0.01) << metric << " " << codec;
      EXPECT_GE(same, 588u) << metric << " " << codec;  // 98% the same neighbours
      const IvfIndex loaded = IvfIndex::from_bytes(coded.to_bytes());
      const Neighbors c = loaded.search(queries.data(), 60, 10);
      EXPECT_EQ(b.ids, c.ids);
      EXPECT_EQ(b.scores, c.scores);
      EXPECT_EQ(loaded.options().factory(), coded.options().factory());
    }
  // Only fast-scan lists hold log-coded norms.
  EXPECT_THROW(IvfIndex(kDim, IvfIndexOptions::parse("ivf:norm=log8,fast_scan=0|tq_mse:b=2")), Error);
  EXPECT_THROW(IvfIndex(kDim, IvfIndexOptions::parse("ivf:norm=log8|int8")), Error);
  EXPECT_THROW(IvfIndex(kDim, IvfIndexOptions::parse("ivf:norm=log8|tq_mse:b=3")), Error);
  EXPECT_THROW(IvfIndexOptions::parse("ivf:norm=log4|tq_mse:b=2"), Error);
}

// A refine store re-ranks k_factor * k candidates by the vectors' copies: at 2 bits the recall of
// the probed lists rises to near that of exact scores over the same lists.
TEST(IvfIndex, RefineStoreRecoversRecallOfCoarseCodes) {
  const std::vector<float> x = clustered(4000, 13), queries = clustered(60, 14);
  const std::string head = "ivf:nlist=40,nprobe=10";
  const double coarse = recall(trained_index(head + "|tq_mse:b=2,rescale=1", x).search(queries.data(), 60, 10), x,
                               queries, 10, Metric::kInnerProduct);
  const double fp16 = recall(trained_index(head + ",refine=fp16,k_factor=8|tq_mse:b=2,rescale=1", x)
                                 .search(queries.data(), 60, 10),
                             x, queries, 10, Metric::kInnerProduct);
  const double int8 = recall(trained_index(head + ",refine=int8,k_factor=8|tq_mse:b=2,rescale=1", x)
                                 .search(queries.data(), 60, 10),
                             x, queries, 10, Metric::kInnerProduct);
  // The ceiling: exact scores (fp32 copies, fp16 here) over the whole probed lists.
  const double ceiling = recall(trained_index(head + ",refine=fp16,k_factor=1000|tq_mse:b=2,rescale=1", x)
                                    .search(queries.data(), 60, 10),
                                x, queries, 10, Metric::kInnerProduct);
  std::printf("[ ivf      ] 2-bit recall@10: codes %.3f, refine fp16 %.3f, int8 %.3f, exact over the lists %.3f\n",
              coarse, fp16, int8, ceiling);
  EXPECT_GT(fp16, coarse + 0.1);
  EXPECT_GT(int8, coarse + 0.1);
  EXPECT_GT(fp16, ceiling - 0.03);
  EXPECT_GT(int8, ceiling - 0.04);
}

// Shards: copies of one trained index, each adding a slice of the vectors under their global ids;
// their merged candidates are bit for bit what one index over all the vectors answers.
TEST(IvfIndex, MergedShardsAnswerExactlyAsOneIndex) {
  const std::vector<float> x = clustered(3000, 15), queries = clustered(40, 16);
  for (const char* factory : {"ivf:nlist=30,nprobe=6|tq_mse:b=4,rescale=1",
                              "ivf:nlist=30,nprobe=6,metric=l2,refine=fp16,k_factor=3|tq_mse:b=2,rescale=1",
                              "ivf:nlist=30,nprobe=30,metric=cosine,refine=int8|tq_mse:b=1",
                              "ivf:nlist=30,nprobe=6,metric=l2|tq_mse:b=3,rescale=1",
                              "ivf:nlist=30,nprobe=6,residual=0|tq_prod:b=3"}) {
    IvfIndex whole(kDim, IvfIndexOptions::parse(factory));
    whole.train(x.data(), 3000);
    const std::vector<uint8_t> trained = whole.to_bytes();
    whole.add(x.data(), 3000);
    for (const size_t shards : {size_t{2}, size_t{3}}) {
      std::vector<IvfIndex> parts;
      for (size_t r = 0; r < shards; ++r) {
        parts.push_back(IvfIndex::from_bytes(trained));
        const size_t first = r * 3000 / shards, end = (r + 1) * 3000 / shards;
        std::vector<int64_t> ids(end - first);
        std::iota(ids.begin(), ids.end(), static_cast<int64_t>(first));
        parts.back().add(x.data() + first * kDim, end - first, ids.data());
      }
      for (const size_t k : {size_t{1}, size_t{10}, size_t{50}}) {
        std::vector<IvfCandidates> found;
        for (const IvfIndex& part : parts) found.push_back(part.candidates(queries.data(), 40, k));
        const Neighbors merged = parts.front().merge(found), expected = whole.search(queries.data(), 40, k);
        EXPECT_EQ(merged.ids, expected.ids) << factory << " shards " << shards << " k " << k;
        EXPECT_EQ(merged.scores, expected.scores) << factory << " shards " << shards << " k " << k;
      }
    }
  }
}

// Each cut (the scan's shortlist, the codes' k_factor * k, the refined k) is made over the union of
// the parts, so a candidate that one index would have cut early stays cut.
TEST(IvfIndex, MergeMakesEachCutOverTheUnionOfParts) {
  // A fast-scan index (b = 4) with a refine store: k = 1 keeps 34 by scan, 1 by code, 1 refined.
  IvfIndex index(kDim, IvfIndexOptions::parse("ivf:nlist=4,nprobe=4,refine=fp16,k_factor=1|tq_mse:b=4"));
  const auto part = [](std::vector<std::array<float, 3>> scores, int64_t first_id) {
    IvfCandidates c;
    c.queries = 1;
    c.k = 1;
    c.per_query = 34;
    c.scan.assign(34, 0.0f);
    c.code.assign(34, 0.0f);
    c.refined.assign(34, 0.0f);
    c.ids.assign(34, -1);
    for (size_t i = 0; i < scores.size(); ++i) {
      c.scan[i] = scores[i][0];
      c.code[i] = scores[i][1];
      c.refined[i] = scores[i][2];
      c.ids[i] = first_id + static_cast<int64_t>(i);
    }
    return c;
  };
  std::vector<std::array<float, 3>> many;
  for (int i = 0; i < 34; ++i) many.push_back({100.0f - i, 50.0f - i, 10.0f - 0.01f * i});
  // Below every scan score of the first part: cut by the scan, however good its code and copy.
  const IvfCandidates late = part({{1.0f, 1000.0f, 1000.0f}}, 100);
  // In the scan's shortlist but below the best code: cut by the codes, however good its copy.
  const IvfCandidates coarse = part({{99.5f, -5.0f, 5000.0f}}, 200);
  EXPECT_EQ(index.merge({part(many, 0), late}).id(0, 0), 0);
  EXPECT_EQ(index.merge({part(many, 0), coarse}).id(0, 0), 0);
  EXPECT_EQ(index.merge({late, part(many, 0), coarse}).id(0, 0), 0);
  // Without the first part, each wins.
  EXPECT_EQ(index.merge({late}).id(0, 0), 100);
  EXPECT_EQ(index.merge({coarse, late}).id(0, 0), 100);
  EXPECT_FLOAT_EQ(index.merge({coarse, late}).score(0, 0), 1000.0f);
  // Parts of another shape are refused.
  IvfCandidates other = part(many, 0);
  other.per_query = 33;
  EXPECT_THROW(index.merge({other}), Error);
  EXPECT_THROW(index.merge({}), Error);
}

TEST(IvfIndex, BytesFormRoundTripsAndRefusesDamage) {
  const std::vector<float> x = clustered(600, 17), queries = clustered(10, 18);
  const IvfIndex index = trained_index("ivf:nlist=12,nprobe=4,metric=l2,refine=int8|tq_mse:b=2", x);
  std::vector<uint8_t> bytes = index.to_bytes();
  const IvfIndex copy = IvfIndex::from_bytes(bytes);
  EXPECT_EQ(copy.search(queries.data(), 10, 5).ids, index.search(queries.data(), 10, 5).ids);
  EXPECT_EQ(copy.bytes(), index.bytes());
  bytes[bytes.size() / 2] ^= 1;
  EXPECT_THROW(IvfIndex::from_bytes(bytes, "rank 0's index"), Error);
  bytes.resize(10);
  EXPECT_THROW(IvfIndex::from_bytes(bytes), Error);
}

TEST(IvfIndex, RefusalsNameTheProblemAndChangeNothing) {
  const std::vector<float> x = clustered(300, 8);
  IvfIndex index(kDim, IvfIndexOptions::parse("ivf:nlist=10|tq_mse:b=4"));
  EXPECT_THROW(index.add(x.data(), 10), Error);             // before train
  EXPECT_THROW(index.search(x.data(), 1, 1), Error);        // before train
  EXPECT_THROW(index.train(x.data(), 5), Error);            // fewer rows than lists
  index.train(x.data(), 300);
  EXPECT_THROW(index.train(x.data(), 300), Error);          // twice
  index.add(x.data(), 100);
  std::vector<float> bad(x.begin(), x.begin() + 10 * kDim);
  bad[3 * kDim + 1] = NAN;
  EXPECT_THROW(index.add(bad.data(), 10), Error);
  const int64_t taken[] = {5};
  EXPECT_THROW(index.add(x.data(), 1, taken), Error);
  const int64_t repeated[] = {500, 500};
  EXPECT_THROW(index.add(x.data(), 2, repeated), Error);
  const int64_t negative[] = {-1};
  EXPECT_THROW(index.add(x.data(), 1, negative), Error);
  EXPECT_EQ(index.size(), 100u);
  EXPECT_THROW(index.search(x.data(), 1, 0), Error);
  EXPECT_THROW(index.search(x.data(), 1, 101), Error);
  EXPECT_THROW(index.search(x.data(), 1, 5, 11), Error);  // nprobe > nlist
  EXPECT_THROW(index.search(bad.data() + 3 * kDim, 1, 5), Error);
  for (const char* factory : {"flat:nlist=3", "ivf:nlist=0", "ivf:nlist=x", "ivf:nprobe=2,nprobe=3", "ivf:color=red",
                              "ivf:metric=manhattan", "ivf:residual=2", "ivf|", "ivf:nlist=4,nprobe=5",
                              "ivf:refine=fp8", "ivf:fast_scan=2", "ivf:k_factor=z"}) {
    try {
      IvfIndexOptions::parse(factory);
      ADD_FAILURE() << factory << " was taken";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("ivf"), std::string::npos) << error.what();
    }
  }
  EXPECT_THROW(IvfIndex(kDim, IvfIndexOptions::parse("ivf|tq_pca:b=4")), Error);  // fits itself to data
  EXPECT_THROW(IvfIndex(kDim, IvfIndexOptions::parse("ivf|kivi_k:b=2,group=32")), Error);
  EXPECT_THROW(IvfIndex(kDim, IvfIndexOptions::parse("ivf:k_factor=0|tq_mse:b=4")), Error);
  IvfIndex empty(kDim, IvfIndexOptions::parse("ivf:nlist=10|tq_mse:b=4"));
  empty.train(x.data(), 300);
  EXPECT_THROW(empty.search(x.data(), 1, 1), Error);  // an empty index
  // Not given, nprobe is at most nlist.
  EXPECT_EQ(IvfIndexOptions::parse("ivf:nlist=7,metric=cosine,residual=0|int8").factory(),
            "ivf:nlist=7,nprobe=7,metric=cosine,residual=0,iterations=10,max_train=0,seed=0,fast_scan=1,refine=none,k_factor=4,norm=codec|int8");
  const std::string full = "ivf:nlist=9,nprobe=3,metric=l2,residual=1,iterations=4,max_train=500,seed=2,fast_scan=0,refine=fp16,k_factor=6,norm=codec|tq_mse:b=2";
  EXPECT_EQ(IvfIndexOptions::parse(full).factory(), full);
}

}  // namespace
}  // namespace kvsketch
