// Pieces of `kvsketch ann eval` shared by its own rows and the FAISS baselines.
#pragma once
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "eval/bench_timing.hpp"
#include "kvsketch/eval/ann_eval.hpp"

namespace kvsketch {

using bench::seconds_since;

// Hands memory freed by earlier rows back to the system, so that each timed build pays for fresh
// pages (faults, zeroing) as a build in its own process would, whichever row it is.
inline void return_free_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

// The rows scaled to unit norm (zero rows stay zero), for the cosine metric.
Matrix unit_rows(const Matrix& m);

// Sets the recall fields of row from found (ids = base rows) against truth.
void fill_recalls(AnnEvalRow& row, const AnnDataset& data, const Neighbors& truth, const Neighbors& found,
                  const std::vector<size_t>& ks);

// FAISS IndexPQ (8-bit sub-quantizers), IndexPQFastScan (4-bit) and IndexScalarQuantizer at the
// code bytes of `bits` per coordinate, measured like our rows. Throws Error when kvsketch was built
// without FAISS.
std::vector<AnnEvalRow> run_faiss_baselines(const AnnDataset& data, double bits, const AnnEvalConfig& config,
                                            const Neighbors& truth, size_t k_max);
bool faiss_available();

}  // namespace kvsketch
