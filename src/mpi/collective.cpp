#include "mpi/collective.hpp"

#include <climits>
#include <numeric>

#include "core/require.hpp"

namespace kvsketch::mpi {

int first_failure(MPI_Comm comm, int rank, bool failed) {
  int first = failed ? rank : INT_MAX;
  MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm);
  return first == INT_MAX ? -1 : first;
}

void throw_from(MPI_Comm comm, int rank, int failing, const std::string& message) {
  uint64_t length = rank == failing ? message.size() : 0;
  MPI_Bcast(&length, 1, MPI_UINT64_T, failing, comm);
  std::string text = rank == failing ? message : std::string(length, ' ');
  MPI_Bcast(text.data(), mpi_count(length, "an error message"), MPI_CHAR, failing, comm);
  throw Error("rank " + std::to_string(failing) + ": " + text);
}

int mpi_count(size_t n, const char* what) {
  require(n <= static_cast<size_t>(INT_MAX), "MPI: {} of {} items is more than one message carries", what, n);
  return static_cast<int>(n);
}

std::vector<uint64_t> all_gather_one(MPI_Comm comm, uint64_t mine) {
  int ranks = 1;
  MPI_Comm_size(comm, &ranks);
  std::vector<uint64_t> all(static_cast<size_t>(ranks));
  MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm);
  return all;
}

std::vector<int64_t> all_gather(MPI_Comm comm, const std::vector<int64_t>& mine) {
  const std::vector<uint64_t> counts = all_gather_one(comm, mine.size());
  std::vector<int> sizes(counts.size()), offsets(counts.size());
  size_t total = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    offsets[r] = mpi_count(total, "a gather");
    sizes[r] = mpi_count(counts[r], "a gather");
    total += counts[r];
  }
  mpi_count(total, "a gather");
  std::vector<int64_t> all(total);
  MPI_Allgatherv(mine.data(), mpi_count(mine.size(), "a gather"), MPI_INT64_T, all.data(), sizes.data(),
                 offsets.data(), MPI_INT64_T, comm);
  return all;
}

}  // namespace kvsketch::mpi
