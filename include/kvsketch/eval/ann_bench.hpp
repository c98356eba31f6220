// `kvsketch ann bench`: sub-linear indexes on one dataset, as ann-benchmarks measures them: for
// each index, build time and bytes per vector, then recall@k against queries per second (one query
// per call, and the whole batch in one call) at each point of its curve (nprobe for IVF indexes,
// efSearch for HNSW) and each thread count. kvsketch's IVF indexes and FAISS indexes (Debian's
// FAISS, by index_factory string) run in the same process on the same data.
#pragma once
#include <string>
#include <vector>

#include "kvsketch/eval/ann_eval.hpp"

namespace kvsketch {

struct AnnBenchConfig {
  // "ivf:...|CODEC" (an IvfIndex factory) or "faiss:FACTORY" (faiss::index_factory, e.g.
  // faiss:IVF1024,PQ392x4fs or faiss:HNSW32,SQ4).
  std::vector<std::string> indexes;
  std::vector<size_t> nprobes = {1, 2, 4, 8, 16, 32, 64, 128};  // IVF curves
  std::vector<size_t> ef_search = {16, 32, 64, 128, 256, 512};   // HNSW curves
  std::vector<int> threads = {1, 2};
  size_t k = 10;
  size_t single_queries = 200;  // queries timed one call each (at most)
  size_t repetitions = 3;       // timed passes per point; queries per second is their median
};

struct AnnBenchRow {
  std::string index;             // the factory string
  std::string parameter;         // "nprobe" or "efSearch"
  size_t value = 0;              // the parameter's value at this point
  int threads = 1;
  double recall = 0;             // recall@k (k-NN recall: true top-k found, ties by distance)
  double qps_single = 0;         // one query per call
  double qps_batch = 0;          // all queries in one call
  double train_s = 0, add_s = 0; // the build (on every thread)
  double bytes_per_vector = 0;   // everything the index holds (its file for FAISS) / vectors
  double vector_bytes = 0;       // kvsketch's own: what each vector adds (IvfIndex::bytes_per_vector)
};

std::vector<AnnBenchRow> run_ann_bench(const AnnDataset& data, const AnnBenchConfig& config);

}  // namespace kvsketch
