// Small collectives over an MPI communicator for the sharded index: agreeing on errors so that a
// refusal on one rank is thrown on every rank (never a hang in the next collective), and gathers
// of variable-length arrays.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kvsketch::mpi {

// The lowest rank whose `failed` is set, or -1 when none is (collective).
int first_failure(MPI_Comm comm, int rank, bool failed);
// Throws on every rank the message of rank `failing` (from first_failure), prefixed with its rank.
[[noreturn]] void throw_from(MPI_Comm comm, int rank, int failing, const std::string& message);

// Runs work on this rank; if it throws Error on any rank, every rank throws the lowest failing
// rank's message (collective).
template <typename Work>
void agree(MPI_Comm comm, int rank, Work&& work) {
  std::string message;
  bool failed = false;
  try {
    work();
  } catch (const std::exception& error) {
    message = error.what();
    failed = true;
  }
  const int failing = first_failure(comm, rank, failed);
  if (failing >= 0) throw_from(comm, rank, failing, message);
}

// Every rank's values, in rank order, on every rank (collective).
std::vector<int64_t> all_gather(MPI_Comm comm, const std::vector<int64_t>& mine);
// Every rank's one value, in rank order.
std::vector<uint64_t> all_gather_one(MPI_Comm comm, uint64_t mine);
// An int count for MPI, refusing what does not fit.
int mpi_count(size_t n, const char* what);

}  // namespace kvsketch::mpi
