// An IVF index sharded over MPI ranks: rank 0 trains, every rank adds its own vectors, and a search
// from rank 0 is answered from all shards. Run with: mpirun -np 2 ./sharded_search
#include <mpi.h>

#include <cstdio>
#include <random>
#include <vector>

#include "kvsketch/mpi/ivf_index.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  constexpr size_t dim = 64, per_rank = 5000;
  // This rank's vectors (a real deployment reads its own slice of the collection).
  std::mt19937 random(1234 + static_cast<unsigned>(rank));
  std::normal_distribution<float> normal;
  std::vector<float> mine(per_rank * dim);
  for (float& v : mine) v = normal(random);
  int status = 0;
  try {
    kvsketch::MpiIvfIndex index(MPI_COMM_WORLD, dim,
                                kvsketch::IvfIndexOptions::parse("ivf:nlist=64,nprobe=8,refine=int8|tq_mse:b=4,rescale=1"));
    index.train(rank == 0 ? mine.data() : nullptr, rank == 0 ? per_rank : 0);
    index.add(mine.data(), per_rank);  // ids: rank 0's rows first, then rank 1's, ...
    // Rank 0 asks for its own first rows: each should find itself.
    const kvsketch::Neighbors hits = index.search(mine.data(), 4, 5);
    if (rank == 0) {
      std::printf("%zu vectors on %d ranks, %zu bytes in all\n", index.size(), ranks, index.bytes());
      for (size_t q = 0; q < hits.queries; ++q) {
        std::printf("query %zu:", q);
        for (size_t r = 0; r < hits.k; ++r) std::printf(" %lld", static_cast<long long>(hits.id(q, r)));
        std::printf("\n");
        if (hits.id(q, 0) != static_cast<int64_t>(q)) status = 1;
      }
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "rank %d: %s\n", rank, error.what());
    status = 1;
  }
  MPI_Finalize();
  return status;
}
