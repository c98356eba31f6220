// MpiIvfIndex under mpirun (-np 2 and -np 4 from CTest): the sharded index answers exactly what one
// IvfIndex over the same vectors answers (ids and score bits), for several factories, uneven
// shards, removals and later adds; a refusal on one rank is thrown on every rank and changes
// nothing. Every rank builds the single index itself for the comparison.
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kvsketch/error.hpp"
#include "kvsketch/mpi/ivf_index.hpp"

namespace {

constexpr size_t kDim = 24, kRows = 3000, kQueries = 30;
int failures = 0, rank = 0, ranks = 1;

void check(bool ok, const std::string& what) {
  if (ok) return;
  ++failures;
  std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
}

// Rows around 30 centres, the same on every rank.
std::vector<float> clustered(size_t n, unsigned seed) {
  std::mt19937_64 random(seed);
  std::normal_distribution<float> normal;
  std::vector<float> centres(30 * kDim), x(n * kDim);
  for (float& c : centres) c = 3.0f * normal(random);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < kDim; ++j) x[i * kDim + j] = centres[(i * 7919 % 30) * kDim + j] + normal(random);
  return x;
}

// Rank r's share of n rows: uneven, and rank 1 of 4 gets none.
std::pair<size_t, size_t> slice(size_t n) {
  std::vector<size_t> weight(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) weight[static_cast<size_t>(r)] = (ranks == 4 && r == 1) ? 0 : static_cast<size_t>(r + 1);
  size_t total = 0, before = 0;
  for (int r = 0; r < ranks; ++r) {
    total += weight[static_cast<size_t>(r)];
    if (r < rank) before += weight[static_cast<size_t>(r)];
  }
  const size_t first = n * before / total, end = n * (before + weight[static_cast<size_t>(rank)]) / total;
  return {first, end - first};
}

bool same(const kvsketch::Neighbors& a, const kvsketch::Neighbors& b) {
  if (a.ids != b.ids || a.scores.size() != b.scores.size()) return false;
  for (size_t i = 0; i < a.scores.size(); ++i)
    if (std::memcmp(&a.scores[i], &b.scores[i], sizeof(float)) != 0) return false;
  return true;
}

template <typename Call>
bool refused_everywhere(Call&& call, const char* needle) {
  bool refused = false;
  try {
    call();
  } catch (const kvsketch::Error& error) {
    refused = std::string(error.what()).find(needle) != std::string::npos;
    if (!refused) std::fprintf(stderr, "rank %d: unexpected message: %s\n", rank, error.what());
  }
  int everywhere = refused ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &everywhere, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return everywhere == 1;
}

void sharded_equals_single(const std::string& factory) {
  using kvsketch::IvfIndex;
  using kvsketch::IvfIndexOptions;
  const std::vector<float> x = clustered(kRows, 1), more = clustered(400, 2), queries = clustered(kQueries, 3);
  const IvfIndexOptions options = IvfIndexOptions::parse(factory);
  IvfIndex single(kDim, options);
  single.train(x.data(), kRows);
  single.add(x.data(), kRows);
  kvsketch::MpiIvfIndex sharded(MPI_COMM_WORLD, kDim, options);
  sharded.train(rank == 0 ? x.data() : nullptr, rank == 0 ? kRows : 0);
  const auto [first, count] = slice(kRows);
  sharded.add(x.data() + first * kDim, count);
  check(sharded.size() == kRows, factory + ": size");
  for (const size_t k : {size_t{1}, size_t{10}, size_t{40}})
    for (const size_t nprobe : {size_t{0}, size_t{1}, options.nlist}) {
      const kvsketch::Neighbors expected = single.search(queries.data(), kQueries, k, nprobe);
      const kvsketch::Neighbors found =
          sharded.search(rank == 0 ? queries.data() : nullptr, rank == 0 ? kQueries : 0, k, nprobe);
      check(same(found, expected), factory + ": search k=" + std::to_string(k) + " nprobe=" + std::to_string(nprobe));
    }
  // Removals from any rank, then more rows (default ids continue past the largest).
  std::vector<int64_t> doomed;
  if (rank == 0) doomed = {5, 17, 123456};
  if (rank == ranks - 1) doomed = {static_cast<int64_t>(kRows - 1), 2000, 5};
  const int64_t single_doomed[] = {5, 17, 2000, static_cast<int64_t>(kRows - 1)};
  single.remove(single_doomed, 4);
  check(sharded.remove(doomed.data(), doomed.size()) == 4, factory + ": removed count");
  single.add(more.data(), 400);
  const auto [more_first, more_count] = slice(400);
  sharded.add(more.data() + more_first * kDim, more_count);
  check(sharded.size() == single.size(), factory + ": size after remove and add");
  // Bytes: every shard's, each holding the centroids; known on every rank without a collective.
  uint64_t shard_bytes = sharded.shard().bytes();
  MPI_Allreduce(MPI_IN_PLACE, &shard_bytes, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) check(sharded.bytes() == shard_bytes, factory + ": bytes");
  check(same(sharded.search(queries.data(), kQueries, 10), single.search(queries.data(), kQueries, 10)),
        factory + ": search after remove and add");
}

void refusals() {
  const std::vector<float> x = clustered(600, 4);
  const kvsketch::IvfIndexOptions options = kvsketch::IvfIndexOptions::parse("ivf:nlist=8,nprobe=3|tq_mse:b=4");
  kvsketch::MpiIvfIndex index(MPI_COMM_WORLD, kDim, options);
  check(refused_everywhere([&] { index.search(x.data(), 1, 1); }, "before train"), "search before train");
  index.train(x.data(), 600);
  const auto [first, count] = slice(600);
  index.add(x.data() + first * kDim, count);
  const kvsketch::Neighbors before = index.search(x.data(), 5, 10);
  // A NaN row on the last rank: every rank refuses, and no shard keeps its rows.
  std::vector<float> bad(x.begin(), x.begin() + 20 * kDim);
  if (rank == ranks - 1) bad[7 * kDim + 3] = NAN;
  check(refused_everywhere([&] { index.add(bad.data(), 20); }, "rank"), "a NaN row on one rank");
  check(index.size() == 600, "size after a refused add");
  check(same(index.search(x.data(), 5, 10), before), "search after a refused add");
  // The same new id on every rank, and an id stored on another rank.
  const int64_t repeated[] = {5000};
  check(refused_everywhere([&] { index.add(x.data(), 1, repeated); }, "repeat"), "an id given on two ranks");
  const int64_t stored[] = {static_cast<int64_t>(rank == 0 ? 599 : 6000 + rank)};
  check(refused_everywhere([&] { index.add(x.data(), 1, stored); }, "already stored"), "a stored id");
  check(index.size() == 600, "size after refused ids");
  check(refused_everywhere([&] { index.search(x.data(), 1, 601); }, "k must be"), "k beyond the size");
  check(refused_everywhere([&] { index.search(x.data(), 1, 1, 9); }, "nprobe"), "nprobe beyond nlist");
  check(refused_everywhere([&] { index.train(x.data(), 600); }, "trained already"), "a second train");
  // Ranks that disagree on the options.
  const kvsketch::IvfIndexOptions other = kvsketch::IvfIndexOptions::parse(
      rank == ranks - 1 ? "ivf:nlist=8,nprobe=4|tq_mse:b=4" : "ivf:nlist=8,nprobe=3|tq_mse:b=4");
  check(refused_everywhere([&] { kvsketch::MpiIvfIndex(MPI_COMM_WORLD, kDim, other); }, "differ"),
        "options that differ between ranks");
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  try {
    for (const char* factory : {"ivf:nlist=24,nprobe=5|tq_mse:b=4,rescale=1",
                                "ivf:nlist=24,nprobe=5,metric=l2,refine=fp16,k_factor=2|tq_mse:b=2,rescale=1",
                                "ivf:nlist=16,nprobe=4,metric=cosine,residual=0,refine=int8|tq_mse:b=1",
                                "ivf:nlist=16,nprobe=4,metric=l2|tq_prod:b=3"})
      sharded_equals_single(factory);
    refusals();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "rank %d: unexpected error: %s\n", rank, error.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int total = failures;
  MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("mpi_ivf_test: %d ranks, %d failures\n", ranks, total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
