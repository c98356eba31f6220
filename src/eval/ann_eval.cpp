// `kvsketch ann eval`: every codec's FlatIndex on one dataset, with recall against exact search,
// build time and query time; FAISS baselines at equal bytes when asked (faiss_baselines.cpp).
#include <algorithm>
#include <optional>

#include "codec/spec_parser.hpp"
#include "eval/ann_eval_internal.hpp"
#include "kvsketch/eval/ann_eval.hpp"
#include "core/require.hpp"

namespace kvsketch {
namespace {

// The codec's b parameter, or its stored bits per coordinate when it has none (fp16, int8).
double nominal_bits(const std::string& spec, const VectorCodec& codec) {
  const ParsedSpec parsed = parse_spec(unwrapped_spec(spec));
  const auto b = parsed.values.find("b");
  if (b != parsed.values.end()) return std::stod(b->second);
  return 8.0 * static_cast<double>(codec.code_bytes()) / static_cast<double>(codec.dim());
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace

std::vector<std::string> default_ann_codecs() {
  return {"tq_pca:b=2", "tq_mse:b=2,rescale=1", "tq_mse:b=2", "tq_prod:b=2",
          "tq_pca:b=4", "tq_mse:b=4,rescale=1", "tq_mse:b=4", "tq_prod:b=4"};
}

void fill_recalls(AnnEvalRow& row, const AnnDataset& data, const Neighbors& truth, const Neighbors& found,
                  const std::vector<size_t>& ks) {
  const std::vector<float> scores = exact_scores(data.base, data.queries, found, data.metric);
  for (const size_t k : ks) {
    if (k > found.k) continue;
    const double recall = recall_1_at_k(truth, scores, found, k, data.metric);
    if (k == 1) row.recall_1_at_1 = recall;
    if (k == 10) row.recall_1_at_10 = recall;
    if (k == 100) row.recall_1_at_100 = recall;
  }
  if (found.k >= 10 && truth.k >= 10) row.recall_10_at_10 = recall_k_at_k(truth, scores, found, 10, data.metric);
}

std::vector<AnnEvalRow> run_ann_eval(const AnnDataset& data, const AnnEvalConfig& config) {
  require(data.base.rows > 0 && data.queries.rows > 0, "ann eval: dataset {} has no base or no queries", data.name);
  require(!config.ks.empty(), "ann eval: no k given");
  size_t k_max = 0;
  for (const size_t k : config.ks) {
    require(k >= 1 && k <= data.base.rows, "ann eval: k = {} is outside 1..{} (the base size)", k, data.base.rows);
    k_max = std::max(k_max, k);
  }
  const Neighbors truth = exact_neighbors(data.base, data.queries, data.metric, std::max<size_t>(k_max, 10),
                                          config.threads);
  const std::vector<std::string> codecs = config.codecs.empty() ? default_ann_codecs() : config.codecs;
  std::vector<AnnEvalRow> rows;
  std::vector<double> bits_seen;
  const size_t d = data.base.cols, nq = data.queries.rows;
  for (const std::string& spec : codecs) {
    FlatIndexOptions options;
    options.codec = spec;
    options.metric = data.metric;
    options.seed = config.seed;
    options.threads = config.threads;
    options.center = config.center;
    if (config.rerank > 0) {
      options.rerank_store = RerankStore::kFp16;
      options.rerank_candidates = config.rerank;
    }
    // Lloyd-Max codebooks are computed once per process and shared (tq_pca solves the Gaussian
    // ones of every width); building the codec first keeps that one-time cost out of build_s.
    make_codec(spec, d, config.seed);
    AnnEvalRow row;
    std::optional<FlatIndex> index;
    for (size_t r = 0; r < std::max<size_t>(1, config.build_repetitions); ++r) {
      index.reset();
      return_free_memory();  // every build starts cold, as a build in its own process would
      const auto start = std::chrono::steady_clock::now();
      index.emplace(d, options);
      index->add(data.base.values.data(), data.base.rows);
      row.build_s_each.push_back(seconds_since(start));
    }
    row.build_s = median(row.build_s_each);
    row.codec = index->codec().spec() + (config.rerank ? fmt::format("+rerank={}", config.rerank) : "") +
                (config.center ? "" : "+uncentred");
    row.bits = nominal_bits(spec, index->codec());
    row.bytes_per_vector = index->bytes_per_vector();
    const size_t single = std::min(nq, config.timed_single_queries);
    const auto single_start = std::chrono::steady_clock::now();
    for (size_t q = 0; q < single; ++q) index->search(data.queries.row(q), 1, k_max);
    row.ms_per_query = 1e3 * seconds_since(single_start) / static_cast<double>(single);
    const auto batch_start = std::chrono::steady_clock::now();
    const Neighbors found = index->search(data.queries.values.data(), nq, k_max);
    row.ms_per_query_batch = 1e3 * seconds_since(batch_start) / static_cast<double>(nq);
    fill_recalls(row, data, truth, found, config.ks);
    rows.push_back(row);
    if (std::find(bits_seen.begin(), bits_seen.end(), row.bits) == bits_seen.end()) bits_seen.push_back(row.bits);
  }
  if (!config.faiss.empty())
    for (const double bits : bits_seen)
      for (AnnEvalRow& row : run_faiss_baselines(data, bits, config, truth, k_max)) rows.push_back(row);
  return rows;
}

}  // namespace kvsketch
