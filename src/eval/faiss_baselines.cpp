// FAISS baselines of `kvsketch ann eval`, compiled when CMake finds FAISS (Debian libfaiss-dev).
// Equal bytes: at b bits per coordinate, IndexPQ gets d*b/8 sub-quantizers of 8 bits, IndexPQFastScan
// d*b/4 of 4 bits, IndexScalarQuantizer b bits per component (b = 4, 6 or 8). FAISS stores no norm
// or scale: its code bytes are d*b/8 where ours add a few bytes of norms (both are reported).
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "eval/ann_eval_internal.hpp"
#include "core/require.hpp"

#ifdef KVSKETCH_HAVE_FAISS
#include <faiss/IndexPQ.h>
#include <faiss/IndexPQFastScan.h>
#include <faiss/IndexScalarQuantizer.h>
#endif

namespace kvsketch {

#ifdef KVSKETCH_HAVE_FAISS
namespace {

using FaissId = faiss::Index::idx_t;

struct Candidate {
  std::string codec;
  std::unique_ptr<faiss::Index> index;
  size_t code_bytes;
};

AnnEvalRow measure(Candidate& candidate, const AnnDataset& data, const std::vector<float>& base,
                   const std::vector<float>& queries, const AnnEvalConfig& config, const Neighbors& truth,
                   size_t k_max, double bits) {
  const auto n = static_cast<FaissId>(data.base.rows), nq = static_cast<FaissId>(data.queries.rows);
  AnnEvalRow row;
  row.codec = candidate.codec;
  row.bits = bits;
  row.bytes_per_vector = candidate.code_bytes;
  return_free_memory();
  const auto start = std::chrono::steady_clock::now();
  candidate.index->train(n, base.data());
  candidate.index->add(n, base.data());
  row.build_s = seconds_since(start);
  row.build_s_each = {row.build_s};
  Neighbors found;
  found.queries = static_cast<size_t>(nq);
  found.k = k_max;
  found.ids.resize(found.queries * k_max);
  found.scores.resize(found.queries * k_max);
  const size_t d = data.base.cols, single = std::min<size_t>(found.queries, config.timed_single_queries);
  const auto single_start = std::chrono::steady_clock::now();
  for (size_t q = 0; q < single; ++q)
    candidate.index->search(1, queries.data() + q * d, static_cast<FaissId>(k_max), found.scores.data(),
                            found.ids.data());
  row.ms_per_query = 1e3 * seconds_since(single_start) / static_cast<double>(single);
  const auto batch_start = std::chrono::steady_clock::now();
  candidate.index->search(nq, queries.data(), static_cast<FaissId>(k_max), found.scores.data(),
                          found.ids.data());
  row.ms_per_query_batch = 1e3 * seconds_since(batch_start) / static_cast<double>(nq);
  fill_recalls(row, data, truth, found, config.ks);
  return row;
}

}  // namespace

bool faiss_available() { return true; }

std::vector<AnnEvalRow> run_faiss_baselines(const AnnDataset& data, double bits, const AnnEvalConfig& config,
                                            const Neighbors& truth, size_t k_max) {
  const size_t d = data.base.cols;
  const faiss::MetricType metric = data.metric == Metric::kL2 ? faiss::METRIC_L2 : faiss::METRIC_INNER_PRODUCT;
  const bool cosine = data.metric == Metric::kCosine;
  const std::vector<float> base = cosine ? unit_rows(data.base).values : data.base.values;
  const std::vector<float> queries = cosine ? unit_rows(data.queries).values : data.queries.values;
  std::vector<Candidate> candidates;
  auto wanted = [&](const char* kind) {
    return std::find(config.faiss.begin(), config.faiss.end(), kind) != config.faiss.end();
  };
  const double code_bits = bits * static_cast<double>(d);
  if (bits == std::floor(bits) && std::fmod(code_bits, 8.0) == 0.0) {
    const size_t pq = static_cast<size_t>(code_bits / 8.0), fast = static_cast<size_t>(code_bits / 4.0);
    if (wanted("PQ") && pq > 0 && d % pq == 0)
      candidates.push_back({fmt::format("faiss:PQ{}x8", pq), std::make_unique<faiss::IndexPQ>(d, pq, 8, metric), pq});
    if (wanted("PQfs") && fast > 0 && d % fast == 0 && fast % 2 == 0)
      candidates.push_back(
          {fmt::format("faiss:PQfs{}x4", fast), std::make_unique<faiss::IndexPQFastScan>(d, fast, 4, metric), pq});
  }
  const int b = static_cast<int>(bits);
  if (wanted("SQ") && bits == b && (b == 4 || b == 6 || b == 8)) {
    const auto type = b == 4 ? faiss::ScalarQuantizer::QT_4bit
                      : b == 6 ? faiss::ScalarQuantizer::QT_6bit
                               : faiss::ScalarQuantizer::QT_8bit;
    candidates.push_back({fmt::format("faiss:SQ{}", b), std::make_unique<faiss::IndexScalarQuantizer>(d, type, metric),
                          (d * static_cast<size_t>(b) + 7) / 8});
  }
  const int threads_before = omp_get_max_threads();
  if (config.threads > 0) omp_set_num_threads(config.threads);
  std::vector<AnnEvalRow> rows;
  try {
    for (Candidate& candidate : candidates)
      rows.push_back(measure(candidate, data, base, queries, config, truth, k_max, bits));
  } catch (const std::exception& e) {
    omp_set_num_threads(threads_before);
    throw Error(fmt::format("FAISS baseline failed: {}", e.what()));
  }
  omp_set_num_threads(threads_before);
  return rows;
}

#else

bool faiss_available() { return false; }

std::vector<AnnEvalRow> run_faiss_baselines(const AnnDataset&, double, const AnnEvalConfig&, const Neighbors&, size_t) {
  throw Error("--baselines faiss: this kvsketch was built without FAISS (install libfaiss-dev and rebuild)");
}

#endif

}  // namespace kvsketch
