#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "ann/top_k.hpp"
#include "kvsketch/ann.hpp"
#include "kvsketch/eval/ann_eval.hpp"
#include "core/require.hpp"
#include "test_util.hpp"

using namespace kvsketch;

namespace {

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "/kvsketch_ann_" + name; }

double recall_1_at(const AnnDataset& data, const FlatIndex& index, const Neighbors& truth, size_t k) {
  const Neighbors found = index.search(data.queries.values.data(), data.queries.rows, k);
  return recall_1_at_k(truth, exact_scores(data.base, data.queries, found, data.metric), found, k, data.metric);
}

}  // namespace

// Recall on real data (the bundled SIFT sample, l2) against exact search, at 2 and 4 bits: the
// rescaled tq_mse (the default codec) beats plain tq_prod, more bits find more, and quantizing
// x - mean (the default) finds more than quantizing x.
TEST(FlatIndex, RecallOnSiftBeatsTqProdAndRisesWithBits) {
  const AnnDataset data = load_ann_dataset("sift-5k", 500);
  ASSERT_EQ(data.base.rows, 4500u);
  const Neighbors truth = exact_neighbors(data.base, data.queries, data.metric, 10);
  std::map<std::string, double> recall;
  for (const std::string codec : {"tq_mse:b=2,rescale=1", "tq_prod:b=2", "tq_mse:b=4,rescale=1", "tq_prod:b=4"})
    for (const bool center : {true, false}) {
      FlatIndexOptions options{codec, Metric::kL2, 1};
      options.center = center;
      FlatIndex index(128, options);
      index.add(data.base.values.data(), data.base.rows);
      recall[codec + (center ? "" : " uncentred")] = recall_1_at(data, index, truth, 10);
    }
  // Measured (seed 1): 0.988 / 0.980 at 2 bits, 1.000 / 1.000 at 4 bits; uncentred 0.92 / 0.53.
  EXPECT_GT(recall["tq_mse:b=2,rescale=1"], 0.97);
  EXPECT_GE(recall["tq_mse:b=2,rescale=1"], recall["tq_prod:b=2"]);
  EXPECT_GT(recall["tq_mse:b=2,rescale=1"], recall["tq_mse:b=2,rescale=1 uncentred"] + 0.03);
  EXPECT_GT(recall["tq_mse:b=2,rescale=1 uncentred"], recall["tq_prod:b=2 uncentred"] + 0.2);
  EXPECT_GT(recall["tq_mse:b=4,rescale=1"], 0.99);
  EXPECT_GE(recall["tq_mse:b=4,rescale=1"], recall["tq_prod:b=4"]);
  EXPECT_GE(recall["tq_mse:b=4,rescale=1"], recall["tq_mse:b=2,rescale=1"]);
}

// The code scores are the codec's estimates: with an exact codec (fp32 copies re-ranked) the
// index is exact search, ties aside.
TEST(FlatIndex, ReRankingFromStoredVectorsIsExact) {
  const AnnDataset data = load_ann_dataset("sift-5k", 200);
  const Neighbors truth = exact_neighbors(data.base, data.queries, data.metric, 10);
  FlatIndexOptions options;
  options.codec = "tq_mse:b=2,rescale=1";
  options.metric = Metric::kL2;
  options.rerank_store = RerankStore::kFp32;
  options.rerank_candidates = 200;
  FlatIndex index(128, options);
  index.add(data.base.values.data(), data.base.rows);
  EXPECT_EQ(index.bytes_per_vector(), 34u + 2u + 4u * 128u);
  EXPECT_GE(recall_1_at(data, index, truth, 1), 0.995);
}

TEST(FlatIndex, MetricsRankAsDefined) {
  const size_t d = 64, n = 2000;
  const auto base = testutil::gaussian_matrix(n, d, 3);
  auto scaled = base;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < d; ++j) scaled[i * d + j] *= 1.0f + static_cast<float>(i % 7);
  const auto queries = testutil::gaussian_matrix(20, d, 4);
  // Cosine ignores the norms of base vectors: scaled rows give the same neighbours.
  FlatIndex plain(d, "tq_mse:b=4,rescale=1", Metric::kCosine, 2), stretched(d, "tq_mse:b=4,rescale=1",
                                                                               Metric::kCosine, 2);
  plain.add(base.data(), n);
  stretched.add(scaled.data(), n);
  EXPECT_EQ(plain.search(queries.data(), 20, 5).ids, stretched.search(queries.data(), 20, 5).ids);
  // fp16 codes are nearly exact: l2 scores are squared distances, ip scores inner products.
  FlatIndex l2(d, "fp16", Metric::kL2), ip(d, "fp16", Metric::kInnerProduct);
  l2.add(base.data(), n);
  ip.add(base.data(), n);
  const Neighbors near = l2.search(queries.data(), 1, 3), best = ip.search(queries.data(), 1, 3);
  float distance = 0.0f, product = 0.0f;
  for (size_t j = 0; j < d; ++j) {
    const float x = base[static_cast<size_t>(near.id(0, 0)) * d + j], y = base[static_cast<size_t>(best.id(0, 0)) * d + j];
    distance += (queries[j] - x) * (queries[j] - x);
    product += queries[j] * y;
  }
  EXPECT_NEAR(near.score(0, 0), distance, 1e-2f * distance);
  EXPECT_NEAR(best.score(0, 0), product, 1e-2f * std::fabs(product));
  EXPECT_LE(near.score(0, 0), near.score(0, 1));
  EXPECT_GE(best.score(0, 0), best.score(0, 1));
  const Neighbors truth = exact_neighbors({n, d, base}, {20, d, queries}, Metric::kL2, 1);
  EXPECT_EQ(l2.search(queries.data(), 20, 1).ids, truth.ids);
}

// Rows are split among threads for few queries and queries among threads for many: the same bits.
TEST(FlatIndex, SameResultsForAnyThreadCount) {
  const size_t d = 32, n = 40000;
  const auto base = testutil::gaussian_matrix(n, d, 5);
  const auto queries = testutil::gaussian_matrix(24, d, 6);
  std::vector<Neighbors> results;
  for (const int threads : {1, 2, 3}) {
    FlatIndexOptions options{"tq_mse:b=2,rescale=1", Metric::kL2, 7};
    options.threads = threads;
    FlatIndex index(d, options);
    index.add(base.data(), n);
    results.push_back(index.search(queries.data(), 1, 10));
    results.push_back(index.search(queries.data(), 24, 10));
  }
  for (size_t i = 2; i < results.size(); ++i) {
    EXPECT_EQ(results[i].ids, results[i % 2].ids);
    EXPECT_EQ(results[i].scores, results[i % 2].scores);
  }
}

TEST(FlatIndex, RemoveAndCustomIds) {
  const size_t d = 16, n = 300;
  const auto base = testutil::gaussian_matrix(n, d, 8);
  std::vector<int64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = 1000 + 3 * static_cast<int64_t>(i);
  FlatIndex index(d, "tq_mse:b=4,rescale=1", Metric::kInnerProduct, 1);
  index.add(base.data(), n, ids.data());
  // Query with base row 10 itself: its id is the best match; after removal it never appears.
  const Neighbors before = index.search(base.data() + 10 * d, 1, 5);
  EXPECT_EQ(before.id(0, 0), 1030);
  const int64_t gone[] = {1030, 42, 1000};
  EXPECT_EQ(index.remove(gone, 3), 2u);
  EXPECT_EQ(index.size(), n - 2);
  EXPECT_FALSE(index.contains(1030));
  const Neighbors after = index.search(base.data() + 10 * d, 1, n - 2);
  for (const int64_t id : after.ids) EXPECT_TRUE(id != 1030 && id != 1000);
  EXPECT_EQ(after.id(0, 0), before.id(0, 1));
  // The removed id may be added again; a taken one is refused and nothing changes.
  index.add(base.data() + 10 * d, 1, gone);
  EXPECT_EQ(index.size(), n - 1);
  EXPECT_NE(testutil::error_of([&] { index.add(base.data(), 1, ids.data() + 5); }).find("id 1015, which is already taken"),
            std::string::npos);
  EXPECT_EQ(index.size(), n - 1);
  // Default ids continue past the largest id added, never onto a stored one (once size()-based,
  // they collided after a removal).
  index.add(base.data(), 2);
  EXPECT_TRUE(index.contains(1000 + 3 * 299 + 1) && index.contains(1000 + 3 * 299 + 2));
  FlatIndex plain(d, "tq_mse:b=4", Metric::kInnerProduct, 1);
  plain.add(base.data(), 10);
  const int64_t three[] = {3};
  plain.remove(three, 1);
  plain.add(base.data(), 1);
  EXPECT_TRUE(plain.contains(10));
  const int64_t largest[] = {INT64_MAX};
  plain.add(base.data(), 1, largest);
  EXPECT_NE(testutil::error_of([&] { plain.add(base.data(), 1); }).find("give ids"), std::string::npos);
}

TEST(FlatIndex, SaveLoadIsExactAndBadFilesAreRefused) {
  const AnnDataset data = load_ann_dataset("sift-5k", 50);
  FlatIndex index(128, "center:tq_mse:b=3,rescale=1", Metric::kL2, 9);
  index.add(data.base.values.data(), 1000);
  index.add(data.base.values.data() + 1000 * 128, 500);
  EXPECT_EQ(index.calibration_bytes(), 2u * 128 + 4u * 128);  // the codec's fp16 mean, the index's centre
  EXPECT_EQ(index.bytes(), 1500 * index.bytes_per_vector() + 768);
  const std::string path = temp_path("index.kvi");
  index.save(path);
  const FlatIndex loaded = FlatIndex::load(path);
  const Neighbors a = index.search(data.queries.values.data(), 50, 10), b = loaded.search(data.queries.values.data(), 50, 10);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.scores, b.scores);
  EXPECT_EQ(loaded.options().codec, index.options().codec);

  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string corrupt = bytes;
  corrupt[bytes.size() / 2] ^= 0x10;
  std::ofstream(temp_path("corrupt.kvi"), std::ios::binary) << corrupt;
  EXPECT_NE(testutil::error_of([&] { FlatIndex::load(temp_path("corrupt.kvi")); }).find("CRC-32 mismatch"), std::string::npos);
  // The last row's fp16 L2 norm (the payload's last 2 bytes) made +Inf, checksum resealed.
  uint64_t last = 0;
  std::memcpy(&last, bytes.data() + bytes.size() - 24, 8);
  const uint64_t with_inf = (last & ~(uint64_t{0xFFFF} << 48)) | (uint64_t{0x7C00} << 48);
  std::ofstream(temp_path("infinite.kvi"), std::ios::binary) << testutil::resealed(bytes, bytes.size() - 24, with_inf);
  EXPECT_NE(testutil::error_of([&] { FlatIndex::load(temp_path("infinite.kvi")); }).find("NaN or Inf"),
            std::string::npos);
  std::ofstream(temp_path("short.kvi"), std::ios::binary) << bytes.substr(0, bytes.size() - 100);
  const std::string short_error = testutil::error_of([&] { FlatIndex::load(temp_path("short.kvi")); });
  EXPECT_NE(short_error.find("truncated"), std::string::npos) << short_error;
  // The length is the file's own (what precedes the trailer), not noise read from a cut payload.
  EXPECT_NE(short_error.find(std::to_string(bytes.size() - 100 - 16)), std::string::npos) << short_error;
  std::ofstream(temp_path("long.kvi"), std::ios::binary) << bytes + std::string(5, '\0');
  const std::string long_error = testutil::error_of([&] { FlatIndex::load(temp_path("long.kvi")); });
  EXPECT_NE(long_error.find("truncated or damaged"), std::string::npos) << long_error;
  // A whole file with its trailer written twice: 16 bytes after the payload the first one records.
  std::ofstream(temp_path("twice.kvi"), std::ios::binary) << bytes + bytes.substr(bytes.size() - 16);
  const std::string twice_error = testutil::error_of([&] { FlatIndex::load(temp_path("twice.kvi")); });
  EXPECT_NE(twice_error.find("has 16 trailing bytes"), std::string::npos) << twice_error;
  std::ofstream(temp_path("cache.kvi"), std::ios::binary)
      << std::string("KVSKETCHCACHE\0\0\0 plus more bytes than a trailer", 48);
  EXPECT_NE(testutil::error_of([&] { FlatIndex::load(temp_path("cache.kvi")); }).find("bad magic"), std::string::npos);
}

TEST(FlatIndex, BadInputNamesTheProblemAndChangesNothing) {
  const size_t d = 8;
  auto base = testutil::gaussian_matrix(10, d, 1);
  FlatIndex index(d, "tq_mse:b=2,rescale=1", Metric::kL2);
  EXPECT_NE(testutil::error_of([&] { index.search(base.data(), 1, 1); }).find("empty"), std::string::npos);
  index.add(base.data(), 10);
  EXPECT_NE(testutil::error_of([&] { index.search(base.data(), 1, 0); }).find("k must be in 1..10"), std::string::npos);
  EXPECT_NE(testutil::error_of([&] { index.search(base.data(), 1, 11); }).find("k must be in 1..10"), std::string::npos);
  auto query = base;
  query[3] = NAN;
  EXPECT_NE(testutil::error_of([&] { index.search(query.data(), 1, 1); }).find("queries"), std::string::npos);
  EXPECT_NE(testutil::error_of([&] { index.add(query.data(), 2); }).find("row 0"), std::string::npos);
  EXPECT_EQ(index.size(), 10u);
  // Finite coordinates whose squares overflow: refused (its scores overflowed to NaN, the top k
  // came back short and search read past it). Large but representable ones still rank.
  std::vector<float> huge(d, 3e38f);
  EXPECT_NE(testutil::error_of([&] { index.search(huge.data(), 1, 3); }).find("row 0 has a norm beyond the float range"),
            std::string::npos);
  std::fill(huge.begin(), huge.end(), 1e18f);
  const Neighbors far = index.search(huge.data(), 1, 3);
  for (const int64_t id : far.ids) EXPECT_TRUE(id >= 0 && id < 10) << id;
  EXPECT_NE(testutil::error_of([] { parse_metric("manhattan"); }).find("unknown metric 'manhattan'"), std::string::npos);
  EXPECT_NE(testutil::error_of([] { FlatIndex(8, "tq_mse:b=9", Metric::kL2); }).find("b"), std::string::npos);
  EXPECT_NE(testutil::error_of([] { FlatIndex(8, "kivi_k:b=2,group=32", Metric::kL2); }).find("groups"), std::string::npos)
      << testutil::error_of([] { FlatIndex(8, "kivi_k:b=2,group=32", Metric::kL2); });
  FlatIndex cosine(d, "tq_mse:b=2", Metric::kCosine);
  std::vector<float> zero(d, 0.0f);
  EXPECT_NE(testutil::error_of([&] { cosine.add(zero.data(), 1); }).find("zero vector"), std::string::npos);
  EXPECT_EQ(cosine.size(), 0u);
  // A refused first add of a calibrating codec leaves it uncalibrated.
  FlatIndex centred(d, "center:tq_mse:b=2", Metric::kL2);
  const auto fresh = centred.codec().calibration();
  EXPECT_THROW(centred.add(query.data(), 2), Error);
  EXPECT_EQ(centred.codec().calibration(), fresh);
  // NaN or Inf among the first rows, which give the centre: named by row and column, nothing kept.
  for (const Metric metric : {Metric::kInnerProduct, Metric::kL2, Metric::kCosine})
    for (const float bad : {NAN, INFINITY, -INFINITY}) {
      FlatIndex fresh_index(d, "tq_pca:b=4", metric);
      auto rows = base;
      rows[3 * d + 5] = bad;
      const std::string message = testutil::error_of([&] { fresh_index.add(rows.data(), 10); });
      const std::string value = std::isnan(bad) ? "NaN" : bad > 0 ? "+Inf" : "-Inf";
      EXPECT_NE(message.find("row 3 column 5 is " + value), std::string::npos) << message;
      EXPECT_EQ(fresh_index.size(), 0u);
      fresh_index.add(base.data(), 10);  // the refused batch left no centre behind
      EXPECT_EQ(fresh_index.size(), 10u);
    }
}

TEST(TopK, NanScoresRankLast) {
  TopK top(3);
  top.push({NAN, 0});
  top.push({1.0f, 1});
  top.push({NAN, 2});
  top.push({-5.0f, 3});
  const std::vector<ScoredRow> best = top.take_sorted();
  ASSERT_EQ(best.size(), 3u);
  EXPECT_EQ(best[0].row, 1u);
  EXPECT_EQ(best[1].row, 3u);
  EXPECT_EQ(best[2].row, 0u);  // -infinity, the lower row of the two NaNs
  EXPECT_EQ(best[2].score, -INFINITY);
}

TEST(AnnEval, GroundTruthAndRecallDefinitions) {
  // Three base points on a line; the query sits nearest the second.
  const Matrix base{3, 2, {0, 0, 1, 0, 3, 0}}, queries{1, 2, {1.2f, 0}};
  const Neighbors truth = exact_neighbors(base, queries, Metric::kL2, 3);
  EXPECT_EQ(truth.ids, (std::vector<int64_t>{1, 0, 2}));
  EXPECT_NEAR(truth.scores[0], 0.04f, 1e-5f);
  Neighbors found{1, 2, {0, 1}, {0, 0}};
  const auto scores = exact_scores(base, queries, found, Metric::kL2);
  EXPECT_EQ(recall_1_at_k(truth, scores, found, 1, Metric::kL2), 0.0);
  EXPECT_EQ(recall_1_at_k(truth, scores, found, 2, Metric::kL2), 1.0);
  EXPECT_EQ(recall_k_at_k(truth, scores, found, 2, Metric::kL2), 1.0);
  found.ids = {2, 1};
  EXPECT_EQ(recall_k_at_k(truth, exact_scores(base, queries, found, Metric::kL2), found, 2, Metric::kL2), 0.5);
}

// The fast scan ranks like the codec's own scores: the byte tables only pick a shortlist.
TEST(FastScan, FindsWhatTheFloatScanFinds) {
  const AnnDataset data = load_ann_dataset("sift-5k", 300);
  for (const std::string codec : {"tq_mse:b=1", "tq_mse:b=2,rescale=1", "tq_mse:b=4,rescale=1"}) {
    FlatIndexOptions options{codec, Metric::kL2, 3};
    FlatIndex fast(128, options);
    options.fast_scan = false;
    FlatIndex plain(128, options);
    ASSERT_TRUE(fast.fast_scan());
    ASSERT_FALSE(plain.fast_scan());
    EXPECT_EQ(fast.bytes_per_vector(), plain.bytes_per_vector());
    fast.add(data.base.values.data(), data.base.rows);
    plain.add(data.base.values.data(), data.base.rows);
    const Neighbors a = fast.search(data.queries.values.data(), 300, 10);
    const Neighbors b = plain.search(data.queries.values.data(), 300, 10);
    size_t same = 0;
    for (size_t i = 0; i < a.ids.size(); ++i) {
      same += a.ids[i] == b.ids[i];
      EXPECT_NEAR(a.scores[i], b.scores[i], 1e-3f * std::fabs(b.scores[i]) + 1.0f);
    }
    EXPECT_GE(static_cast<double>(same) / static_cast<double>(a.ids.size()), 0.99) << codec;
  }
}

TEST(FastScan, RemoveSaveAndLoadKeepTheLayout) {
  const AnnDataset data = load_ann_dataset("sift-5k", 40);
  FlatIndex index(128, "tq_mse:b=4,rescale=1", Metric::kL2, 4);
  index.add(data.base.values.data(), 1000);
  std::vector<int64_t> gone;
  for (int64_t id = 0; id < 1000; id += 7) gone.push_back(id);
  EXPECT_EQ(index.remove(gone.data(), gone.size()), gone.size());
  FlatIndex reference(128, FlatIndexOptions{"tq_mse:b=4,rescale=1", Metric::kL2, 4, RerankStore::kNone, 0, 0, false});
  reference.add(data.base.values.data(), 1000);
  reference.remove(gone.data(), gone.size());
  const std::string path = temp_path("fast.kvi");
  index.save(path);
  const FlatIndex loaded = FlatIndex::load(path);
  EXPECT_TRUE(loaded.fast_scan());
  const Neighbors a = loaded.search(data.queries.values.data(), 40, 5);
  const Neighbors b = index.search(data.queries.values.data(), 40, 5);
  const Neighbors c = reference.search(data.queries.values.data(), 40, 5);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.scores, b.scores);
  size_t same = 0;
  for (size_t i = 0; i < a.ids.size(); ++i) {
    same += a.ids[i] == c.ids[i];
    EXPECT_EQ(a.ids[i] % 7 == 0, false);
  }
  EXPECT_GE(same, a.ids.size() - 2);
}

TEST(FastScan, PiecewiseAddsStoreTheSameBytesAsOneBatch) {
  // Pieces that start inside a block, end inside one and span several: every padding nibble of
  // the last block must still be zero, so that the saved files agree byte for byte.
  const AnnDataset data = load_ann_dataset("sift-5k", 40);
  FlatIndexOptions options{"tq_mse:b=4,rescale=1", Metric::kL2, 4};
  options.center = false;  // the centre would come from the first piece alone
  FlatIndex whole(128, options), pieces(128, options);
  const size_t total = 1001;
  whole.add(data.base.values.data(), total);
  size_t done = 0;
  for (const size_t piece : {1, 45, 64, 33, 200, 10}) {
    pieces.add(data.base.values.data() + done * 128, piece);
    done += piece;
  }
  pieces.add(data.base.values.data() + done * 128, total - done);
  ASSERT_TRUE(pieces.fast_scan());
  const auto bytes_of = [](const FlatIndex& index, const std::string& name) {
    index.save(temp_path(name));
    std::ifstream in(temp_path(name), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(bytes_of(pieces, "pieces.kvi"), bytes_of(whole, "whole.kvi"));
}

// gaussian:...,decay=H: unit rows whose coordinate j has its spread scaled by 1 / (1 + j / H), so the
// variance falls over the coordinates as asked (isotropic without decay), and tq_pca, which gives
// bits by variance, finds more true neighbours there than the rescaled tq_mse at the same bytes.
TEST(AnnDataset, GaussianDecayGivesAnAnisotropicSpectrum) {
  const auto variance_ratio = [](const AnnDataset& data) {
    double first = 0.0, last = 0.0;
    const size_t d = data.base.cols;
    for (size_t i = 0; i < data.base.rows; ++i) {
      const float* row = data.base.values.data() + i * d;
      EXPECT_NEAR(testutil::norm(row, d), 1.0, 1e-5);
      first += static_cast<double>(row[0]) * row[0];
      last += static_cast<double>(row[d - 1]) * row[d - 1];
    }
    return first / last;
  };
  const AnnDataset flat = load_ann_dataset("gaussian:d=64,n=3000", 100);
  const AnnDataset decaying = load_ann_dataset("gaussian:d=64,n=3000,decay=4", 100);
  EXPECT_EQ(decaying.name, "gaussian:d=64,n=3000,seed=1,decay=4");
  EXPECT_EQ(decaying.base.rows, 3000u);
  EXPECT_EQ(decaying.queries.rows, 100u);
  EXPECT_NEAR(variance_ratio(flat), 1.0, 0.15);
  // 280 before the normalization, which takes more off the loud coordinates (they make much of
  // the norm): 195 measured.
  const double spread = std::pow(1.0 + 63.0 / 4.0, 2.0);
  EXPECT_GT(variance_ratio(decaying), 0.5 * spread);
  EXPECT_LT(variance_ratio(decaying), spread);
  EXPECT_THROW(load_ann_dataset("gaussian:d=64,n=3000,decay=-1", 100), Error);

  const Neighbors truth = exact_neighbors(decaying.base, decaying.queries, decaying.metric, 1);
  double recall[2];
  const std::string codecs[2] = {"tq_pca:b=2", "tq_mse:b=2,rescale=1"};
  for (int c = 0; c < 2; ++c) {
    FlatIndexOptions options;
    options.codec = codecs[c];
    options.metric = decaying.metric;
    FlatIndex index(64, options);
    index.add(decaying.base.values.data(), decaying.base.rows);
    recall[c] = recall_1_at(decaying, index, truth, 1);
  }
  EXPECT_GT(recall[0], recall[1] + 0.1) << recall[0] << " " << recall[1];
}
