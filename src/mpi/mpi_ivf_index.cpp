#include "kvsketch/mpi/ivf_index.hpp"

#include <algorithm>
#include <numeric>
#include <unordered_set>

#include "core/require.hpp"
#include "mpi/collective.hpp"

namespace kvsketch {
namespace {

using mpi::agree;

// The options every rank gives, checked against the root's (collective), so that no rank builds
// a shard of another shape.
const IvfIndexOptions& agreed_options(MPI_Comm comm, size_t dim, const IvfIndexOptions& options) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::string mine = std::to_string(dim) + "/" + options.factory(), root = mine;
  uint64_t length = root.size();
  MPI_Bcast(&length, 1, MPI_UINT64_T, 0, comm);
  root.resize(length);
  MPI_Bcast(root.data(), mpi::mpi_count(length, "the options"), MPI_CHAR, 0, comm);
  agree(comm, rank, [&] {
    require(mine == root, "MpiIvfIndex: this rank's dim/options {} differ from rank 0's {}", mine, root);
  });
  return options;
}

// The candidates of every rank for queries [first, first + count), gathered to root.
std::vector<IvfCandidates> gather_candidates(MPI_Comm comm, int rank, int ranks, int root, const IvfCandidates& mine) {
  const size_t slots = mine.ids.size();
  std::vector<float> scores(3 * slots);
  std::copy(mine.scan.begin(), mine.scan.end(), scores.begin());
  std::copy(mine.code.begin(), mine.code.end(), scores.begin() + static_cast<std::ptrdiff_t>(slots));
  std::copy(mine.refined.begin(), mine.refined.end(), scores.begin() + static_cast<std::ptrdiff_t>(2 * slots));
  std::vector<float> all_scores(rank == root ? scores.size() * static_cast<size_t>(ranks) : 0);
  std::vector<int64_t> all_ids(rank == root ? slots * static_cast<size_t>(ranks) : 0);
  MPI_Gather(scores.data(), mpi::mpi_count(scores.size(), "candidate scores"), MPI_FLOAT, all_scores.data(),
             mpi::mpi_count(scores.size(), "candidate scores"), MPI_FLOAT, root, comm);
  MPI_Gather(mine.ids.data(), mpi::mpi_count(slots, "candidate ids"), MPI_INT64_T, all_ids.data(),
             mpi::mpi_count(slots, "candidate ids"), MPI_INT64_T, root, comm);
  std::vector<IvfCandidates> parts;
  if (rank != root) return parts;
  for (int r = 0; r < ranks; ++r) {
    IvfCandidates part;
    part.queries = mine.queries;
    part.k = mine.k;
    part.per_query = mine.per_query;
    const float* s = all_scores.data() + static_cast<size_t>(r) * 3 * slots;
    part.scan.assign(s, s + slots);
    part.code.assign(s + slots, s + 2 * slots);
    part.refined.assign(s + 2 * slots, s + 3 * slots);
    const int64_t* ids = all_ids.data() + static_cast<size_t>(r) * slots;
    part.ids.assign(ids, ids + slots);
    parts.push_back(std::move(part));
  }
  return parts;
}

}  // namespace

MpiIvfIndex::MpiIvfIndex(MPI_Comm comm, size_t dim, const IvfIndexOptions& options)
    : comm_(comm), shard_(dim, agreed_options(comm, dim, options)) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &ranks_);
  count_bytes();
}

void MpiIvfIndex::train(const float* x, size_t n, int root) {
  require(root >= 0 && root < ranks_, "MpiIvfIndex: train: root {} is not a rank of {}", root, ranks_);
  std::vector<uint8_t> bytes;
  agree(comm_, rank_, [&] {
    if (rank_ != root) return;
    shard_.train(x, n);
    bytes = shard_.to_bytes();
  });
  uint64_t length = bytes.size();
  MPI_Bcast(&length, 1, MPI_UINT64_T, root, comm_);
  bytes.resize(length);
  MPI_Bcast(bytes.data(), mpi::mpi_count(length, "the trained index"), MPI_BYTE, root, comm_);
  agree(comm_, rank_, [&] {
    if (rank_ == root) return;
    require(shard_.size() == 0, "MpiIvfIndex: train: this rank's shard holds vectors already");
    shard_ = IvfIndex::from_bytes(bytes, "the trained index from rank " + std::to_string(root));
  });
  count_bytes();
}

void MpiIvfIndex::add(const float* x, size_t n, const int64_t* ids) {
  const std::vector<uint64_t> counts = mpi::all_gather_one(comm_, n);
  const std::vector<uint64_t> given = mpi::all_gather_one(comm_, ids != nullptr ? 1 : 0);
  const size_t total = std::accumulate(counts.begin(), counts.end(), uint64_t{0});
  const size_t offset = std::accumulate(counts.begin(), counts.begin() + rank_, uint64_t{0});
  std::vector<int64_t> new_ids(n);
  agree(comm_, rank_, [&] {
    require(std::all_of(given.begin(), given.end(), [&](uint64_t g) { return g == given.front(); }),
            "MpiIvfIndex: add: some ranks give ids and some do not");
    if (ids) {
      std::copy_n(ids, n, new_ids.begin());
    } else {
      require(next_id_ <= INT64_MAX - static_cast<int64_t>(total),
              "MpiIvfIndex: add: default ids would pass 2^63 - 1; give ids");
      std::iota(new_ids.begin(), new_ids.end(), next_id_ + static_cast<int64_t>(offset));
    }
  });
  // Given ids: distinct across ranks, and stored on no rank.
  const std::vector<int64_t> all_new = ids ? mpi::all_gather(comm_, new_ids) : std::vector<int64_t>{};
  agree(comm_, rank_, [&] {
    if (!ids) return;
    const std::unordered_set<int64_t> distinct(all_new.begin(), all_new.end());
    require(distinct.size() == all_new.size(), "MpiIvfIndex: add: the ranks' ids repeat an id");
    const int64_t taken = shard_.first_present(all_new.data(), all_new.size());
    require(taken < 0, "MpiIvfIndex: add: id {} is already stored (on rank {})", taken, rank_);
  });
  // Each shard adds atomically; if any rank refused, the ranks that added take their rows out.
  std::string message;
  bool failed = false;
  try {
    shard_.add(x, n, new_ids.data());
  } catch (const std::exception& error) {
    message = error.what();
    failed = true;
  }
  const int failing = mpi::first_failure(comm_, rank_, failed);
  if (failing >= 0) {
    if (!failed) shard_.remove(new_ids.data(), new_ids.size());
    mpi::throw_from(comm_, rank_, failing, message);
  }
  int64_t next = next_id_ + static_cast<int64_t>(ids ? 0 : total);
  for (int64_t id : new_ids) next = std::max(next, id == INT64_MAX ? id : id + 1);
  MPI_Allreduce(MPI_IN_PLACE, &next, 1, MPI_INT64_T, MPI_MAX, comm_);
  next_id_ = next;
  size_ += total;
  count_bytes();
}

Neighbors MpiIvfIndex::search(const float* queries, size_t nq, size_t k, size_t nprobe, int root) {
  require(root >= 0 && root < ranks_, "MpiIvfIndex: search: root {} is not a rank of {}", root, ranks_);
  const size_t dim = shard_.dim();
  uint64_t request[3] = {nq, k, nprobe};
  MPI_Bcast(request, 3, MPI_UINT64_T, root, comm_);
  nq = request[0];
  k = request[1];
  nprobe = request[2];
  agree(comm_, rank_, [&] {
    if (rank_ != root) return;
    require(shard_.trained(), "MpiIvfIndex: search before train");
    require(size_ > 0, "MpiIvfIndex: search: the index is empty");
    require(k >= 1 && k <= size_, "MpiIvfIndex: search: k must be in 1..size() = {}, got {}", size_, k);
    require(nprobe <= shard_.options().nlist, "MpiIvfIndex: search: nprobe must be in 1..nlist = {} (0: the options'), got {}",
            shard_.options().nlist, nprobe);
    require(nq == 0 || queries != nullptr, "MpiIvfIndex: search: queries is null");
    require(nq <= (size_t{1} << 40) / std::max<size_t>(dim, 1), "MpiIvfIndex: search: {} queries is too many", nq);
  });
  std::vector<float> q(nq * dim);
  if (rank_ == root && nq > 0) std::copy_n(queries, nq * dim, q.begin());
  Neighbors out;
  out.queries = nq;
  out.k = k;
  out.ids.resize(nq * k);
  out.scores.resize(nq * k);
  // Queries in batches whose candidates fit one message.
  const size_t per_query = 3 * (2 * k * std::max<size_t>(shard_.options().k_factor, 1) + 32);
  const size_t batch = std::max<size_t>(1, (size_t{1} << 24) / per_query);
  for (size_t first = 0; first < nq; first += batch) {
    const size_t count = std::min(batch, nq - first);
    MPI_Bcast(q.data() + first * dim, mpi::mpi_count(count * dim, "queries"), MPI_FLOAT, root, comm_);
    IvfCandidates mine;
    agree(comm_, rank_, [&] { mine = shard_.candidates(q.data() + first * dim, count, k, nprobe); });
    const std::vector<IvfCandidates> parts = gather_candidates(comm_, rank_, ranks_, root, mine);
    if (rank_ == root) {
      const Neighbors merged = shard_.merge(parts);
      std::copy(merged.ids.begin(), merged.ids.end(), out.ids.begin() + static_cast<std::ptrdiff_t>(first * k));
      std::copy(merged.scores.begin(), merged.scores.end(), out.scores.begin() + static_cast<std::ptrdiff_t>(first * k));
    }
  }
  MPI_Bcast(out.ids.data(), mpi::mpi_count(out.ids.size(), "result ids"), MPI_INT64_T, root, comm_);
  MPI_Bcast(out.scores.data(), mpi::mpi_count(out.scores.size(), "result scores"), MPI_FLOAT, root, comm_);
  return out;
}

size_t MpiIvfIndex::remove(const int64_t* ids, size_t n) {
  agree(comm_, rank_, [&] { require(n == 0 || ids != nullptr, "MpiIvfIndex: remove: ids is null"); });
  const std::vector<int64_t> mine(ids, ids + n);
  const std::vector<int64_t> all = mpi::all_gather(comm_, mine);
  uint64_t removed = shard_.remove(all.data(), all.size());
  MPI_Allreduce(MPI_IN_PLACE, &removed, 1, MPI_UINT64_T, MPI_SUM, comm_);
  size_ -= removed;
  count_bytes();
  return removed;
}

void MpiIvfIndex::count_bytes() {
  uint64_t total = shard_.bytes();
  MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_UINT64_T, MPI_SUM, comm_);
  bytes_ = total;
}

void MpiIvfIndex::save_shards(const std::string& path_prefix) const {
  agree(comm_, rank_, [&] { shard_.save(path_prefix + ".rank" + std::to_string(rank_)); });
}

}  // namespace kvsketch
