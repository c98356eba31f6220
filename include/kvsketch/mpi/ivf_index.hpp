// MpiIvfIndex: an IvfIndex sharded over the ranks of an MPI communicator. One rank trains, and the
// trained, empty index goes to every rank; each rank adds its own vectors to its shard; a search
// sends the root's queries to every rank, each scans its shard, and the root merges the shards'
// candidates (IvfIndex::merge), which gives exactly what one IvfIndex over all the vectors, added
// in rank order, answers: the same ids and the same score bits.
//
//   MPI_Init(&argc, &argv);
//   kvsketch::MpiIvfIndex index(MPI_COMM_WORLD, 768, kvsketch::IvfIndexOptions::parse(
//       "ivf:nlist=4096,nprobe=32|tq_mse:b=4,rescale=1"));
//   index.train(rank == 0 ? sample : nullptr, rank == 0 ? n_sample : 0);
//   index.add(my_rows, my_n);                 // ids: global row numbers in rank order
//   kvsketch::Neighbors hits = index.search(rank == 0 ? queries : nullptr, rank == 0 ? nq : 0, 10);
//
// Every member function that changes the index or searches it is collective: all ranks call it,
// in the same order. The accessors (rank, ranks, size, bytes, shard) are not. An error on any rank
// (a NaN row, a taken id) is thrown on every rank, naming the rank, and leaves every shard as it
// was. Built with KVSKETCH_MPI (libkvsketch_mpi, linked with the MPI library).
#pragma once
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kvsketch/ivf_index.hpp"

#pragma GCC visibility push(default)
namespace kvsketch {

class MpiIvfIndex {
 public:
  // Every rank gives the same dim and options (checked).
  MpiIvfIndex(MPI_Comm comm, size_t dim, const IvfIndexOptions& options);

  int rank() const { return rank_; }
  int ranks() const { return ranks_; }
  // Vectors on all ranks together.
  size_t size() const { return size_; }
  // This rank's shard.
  const IvfIndex& shard() const { return shard_; }

  // Rank `root` trains on its n rows (the others' x and n are ignored); every rank then holds a
  // copy of the trained, empty index.
  void train(const float* x, size_t n, int root = 0);
  // Each rank adds its own n rows (n may differ, and be 0). Without ids, rows are numbered on from
  // the largest id added, rank 0's rows first: what one index given the ranks' rows in order would
  // number them. Given ids must be distinct across all ranks and new.
  void add(const float* x, size_t n, const int64_t* ids = nullptr);
  // The root's nq queries (the others' are ignored); every rank returns the merged answer. nprobe
  // 0: the options'.
  Neighbors search(const float* queries, size_t nq, size_t k, size_t nprobe = 0, int root = 0);
  // Each rank's ids (which may differ) are removed wherever they lie; returns how many, in all.
  size_t remove(const int64_t* ids, size_t n);
  // Bytes held on all ranks together (each rank's IvfIndex::bytes, centroids on every rank), as
  // of the last collective call.
  size_t bytes() const { return bytes_; }

  // Each rank writes its shard to path_prefix + ".rank" + rank (an IvfIndex file).
  void save_shards(const std::string& path_prefix) const;

 private:
  void count_bytes();  // collective

  MPI_Comm comm_;
  int rank_ = 0, ranks_ = 1;
  IvfIndex shard_;
  size_t size_ = 0, bytes_ = 0;
  int64_t next_id_ = 0;  // one past the largest id added on any rank
};

}  // namespace kvsketch
#pragma GCC visibility pop
