// IvfIndex: recall against exact search on clustered data for each metric, more lists probed
// finding more, the same bits for any thread count and after save/load, and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <set>
#include <string>
#include <vector>

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
  // Bytes: codes, ids and fp16 norms per vector, the centroids and their squared norms once.
  EXPECT_EQ(index.bytes_per_vector(), index.codec().code_bytes() + 8 + 2);
  EXPECT_EQ(index.bytes(), 497 * index.bytes_per_vector() + (10 * kDim + 10) * 4);
  size_t listed = 0;
  for (size_t n : index.list_sizes()) listed += n;
  EXPECT_EQ(listed, 497u);
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
  EXPECT_THROW(index.search(bad.data() + 3 * kDim, 1, 5), Error);
  for (const char* factory : {"flat:nlist=3", "ivf:nlist=0", "ivf:nlist=x", "ivf:nprobe=2,nprobe=3", "ivf:color=red",
                              "ivf:metric=manhattan", "ivf:residual=2", "ivf|"}) {
    try {
      IvfIndexOptions::parse(factory);
      ADD_FAILURE() << factory << " was taken";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("ivf"), std::string::npos) << error.what();
    }
  }
  EXPECT_THROW(IvfIndex(kDim, IvfIndexOptions::parse("ivf|tq_pca:b=4")), Error);  // fits itself to data
  EXPECT_THROW(IvfIndex(kDim, IvfIndexOptions::parse("ivf|kivi_k:b=2,group=32")), Error);
  EXPECT_EQ(IvfIndexOptions::parse("ivf:nlist=7,metric=cosine,residual=0|int8").factory(),
            "ivf:nlist=7,nprobe=16,metric=cosine,residual=0,iterations=10,seed=0|int8");
}

}  // namespace
}  // namespace kvsketch
