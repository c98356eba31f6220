// `kvsketch ann bench`: build each index once, then walk its curve. Each point is timed
// `repetitions` times (median), single queries and the batch separately, at each thread count.
#include "kvsketch/eval/ann_bench.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>

#include "core/require.hpp"
#include "eval/ann_eval_internal.hpp"
#include "kvsketch/ivf_index.hpp"

#ifdef KVSKETCH_HAVE_FAISS
#include <faiss/AutoTune.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IVFlib.h>
#include <faiss/IndexIVF.h>
#include <faiss/impl/io.h>
#include <faiss/index_factory.h>
#include <faiss/index_io.h>
#endif

namespace kvsketch {
namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// What the bench needs of an index, whoever built it.
struct BenchedIndex {
  std::string parameter;                         // of the curve
  std::function<void(size_t value)> set;         // the curve's parameter
  std::function<Neighbors(const float*, size_t, size_t)> search;  // queries, count, k
  double train_s = 0, add_s = 0, bytes_per_vector = 0, vector_bytes = 0;
  size_t max_value = 0;  // the curve stops here (nlist)
};

std::unique_ptr<BenchedIndex> build_ours(const std::string& factory, const AnnDataset& data,
                                         const std::vector<float>& base) {
  auto bench = std::make_unique<BenchedIndex>();
  IvfIndexOptions options = IvfIndexOptions::parse(factory);
  options.metric = data.metric;
  auto index = std::make_shared<IvfIndex>(data.base.cols, options);
  const size_t n = data.base.rows;
  return_free_memory();
  auto start = std::chrono::steady_clock::now();
  index->train(base.data(), n);
  bench->train_s = seconds_since(start);
  start = std::chrono::steady_clock::now();
  index->add(base.data(), n);
  bench->add_s = seconds_since(start);
  bench->bytes_per_vector = static_cast<double>(index->bytes()) / static_cast<double>(n);
  bench->vector_bytes = static_cast<double>(index->bytes_per_vector());
  bench->parameter = "nprobe";
  bench->max_value = options.nlist;
  auto nprobe = std::make_shared<size_t>(options.nprobe);
  bench->set = [nprobe](size_t value) { *nprobe = value; };
  bench->search = [index, nprobe](const float* q, size_t nq, size_t k) { return index->search(q, nq, k, *nprobe); };
  return bench;
}

#ifdef KVSKETCH_HAVE_FAISS
std::unique_ptr<BenchedIndex> build_faiss(const std::string& factory, const AnnDataset& data,
                                          const std::vector<float>& base) {
  using FaissId = faiss::Index::idx_t;
  auto bench = std::make_unique<BenchedIndex>();
  const faiss::MetricType metric = data.metric == Metric::kL2 ? faiss::METRIC_L2 : faiss::METRIC_INNER_PRODUCT;
  std::shared_ptr<faiss::Index> index;
  try {
    index.reset(faiss::index_factory(static_cast<int>(data.base.cols), factory.c_str(), metric));
  } catch (const std::exception& error) {
    throw Error(fmt::format("ann bench: FAISS refused faiss:{}: {}", factory, error.what()));
  }
  const auto n = static_cast<FaissId>(data.base.rows);
  return_free_memory();
  auto start = std::chrono::steady_clock::now();
  index->train(n, base.data());
  bench->train_s = seconds_since(start);
  start = std::chrono::steady_clock::now();
  index->add(n, base.data());
  bench->add_s = seconds_since(start);
  faiss::VectorIOWriter writer;
  faiss::write_index(index.get(), &writer);
  bench->bytes_per_vector = static_cast<double>(writer.data.size()) / static_cast<double>(n);
  const bool hnsw = dynamic_cast<faiss::IndexHNSW*>(index.get()) != nullptr;
  bench->parameter = hnsw ? "efSearch" : "nprobe";
  if (const auto* ivf = faiss::ivflib::try_extract_index_ivf(index.get())) bench->max_value = ivf->nlist;
  const std::string parameter = bench->parameter;
  bench->set = [index, parameter](size_t value) {
    faiss::ParameterSpace().set_index_parameter(index.get(), parameter, static_cast<double>(value));
  };
  bench->search = [index](const float* q, size_t nq, size_t k) {
    Neighbors found;
    found.queries = nq;
    found.k = k;
    found.ids.resize(nq * k);
    found.scores.resize(nq * k);
    index->search(static_cast<FaissId>(nq), q, static_cast<FaissId>(k), found.scores.data(), found.ids.data());
    return found;
  };
  return bench;
}
#endif

}  // namespace

std::vector<AnnBenchRow> run_ann_bench(const AnnDataset& data, const AnnBenchConfig& config) {
  require(data.base.rows > 0 && data.queries.rows > 0, "ann bench: dataset {} has no base or no queries", data.name);
  require(config.k >= 1 && config.k <= data.base.rows, "ann bench: k = {} is outside 1..{}", config.k, data.base.rows);
  require(!config.indexes.empty(), "ann bench: no index given");
  require(config.repetitions >= 1, "ann bench: repetitions must be >= 1");
  const int threads_before = omp_get_max_threads();
  const Neighbors truth = exact_neighbors(data.base, data.queries, data.metric, config.k, 0);
  // Cosine is inner product over unit rows, for FAISS (ours normalizes itself).
  const bool cosine = data.metric == Metric::kCosine;
  const std::vector<float> base = cosine ? unit_rows(data.base).values : data.base.values;
  const std::vector<float> queries = cosine ? unit_rows(data.queries).values : data.queries.values;
  const size_t nq = data.queries.rows, d = data.base.cols, single = std::min(nq, config.single_queries);
  std::vector<AnnBenchRow> rows;
  for (const std::string& factory : config.indexes) {
    std::unique_ptr<BenchedIndex> index;
    if (factory.rfind("faiss:", 0) == 0) {
#ifdef KVSKETCH_HAVE_FAISS
      index = build_faiss(factory.substr(6), data, base);
#else
      throw Error(fmt::format("ann bench: {} needs FAISS, and this build has none (bash scripts/setup.sh extras)",
                              factory));
#endif
    } else {
      index = build_ours(factory, data, data.base.values);
    }
    const std::vector<size_t>& curve = index->parameter == "efSearch" ? config.ef_search : config.nprobes;
    for (const size_t value : curve) {
      if (index->max_value && value > index->max_value) continue;
      index->set(value);
      for (const int threads : config.threads) {
        omp_set_num_threads(threads > 0 ? threads : threads_before);
        AnnBenchRow row;
        row.index = factory;
        row.parameter = index->parameter;
        row.value = value;
        row.threads = threads > 0 ? threads : threads_before;
        row.train_s = index->train_s;
        row.add_s = index->add_s;
        row.bytes_per_vector = index->bytes_per_vector;
        row.vector_bytes = index->vector_bytes;
        std::vector<double> single_s, batch_s;
        Neighbors found;
        for (size_t r = 0; r < config.repetitions; ++r) {
          auto start = std::chrono::steady_clock::now();
          for (size_t q = 0; q < single; ++q) index->search(queries.data() + q * d, 1, config.k);
          single_s.push_back(seconds_since(start));
          start = std::chrono::steady_clock::now();
          found = index->search(queries.data(), nq, config.k);
          batch_s.push_back(seconds_since(start));
        }
        row.qps_single = static_cast<double>(single) / median(single_s);
        row.qps_batch = static_cast<double>(nq) / median(batch_s);
        const std::vector<float> scores = exact_scores(data.base, data.queries, found, data.metric);
        row.recall = recall_k_at_k(truth, scores, found, config.k, data.metric);
        rows.push_back(row);
      }
    }
    omp_set_num_threads(threads_before);
  }
  return rows;
}

}  // namespace kvsketch
