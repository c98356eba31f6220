// kvsketch ann eval | build | search: nearest-neighbour search over codec codes (FlatIndex),
// evaluated against exact search and FAISS, or built and queried for real use.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <optional>

#include "commands.hpp"
#include "kvsketch/eval/ann_bench.hpp"
#include "kvsketch/eval/ann_eval.hpp"
#include "core/require.hpp"
#include "kvsketch/limits.hpp"
#include "list_options.hpp"
#include "text_table.hpp"

namespace kvsketch::tools {
namespace {

struct EvalArguments {
  std::string data, codecs, ks = "1,10,100", baselines, metric;
  size_t queries = 0, rerank = 0, repetitions = 1;
  int threads = 0;
  uint64_t seed = 0;
  bool json = false, no_center = false;
};

struct BuildArguments {
  std::string data, codec = "tq_pca:b=4", metric = "l2", out, rerank_store = "none";
  size_t queries = 0, rerank = 0;
  int threads = 0;
  uint64_t seed = 0;
};

struct BenchArguments {
  std::string data, indexes, metric, nprobes = "1,2,4,8,16,32,64,128", ef = "16,32,64,128,256,512", threads = "1,2";
  size_t queries = 0, k = 10, single = 200, repetitions = 3;
  bool json = false;
};

struct SearchArguments {
  std::string index, queries;
  size_t k = 10;
  bool json = false;
};

nlohmann::json optional_number(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

std::string percent(const std::optional<double>& value) {
  return value ? fmt::format("{:.3f}", *value) : std::string("-");
}

// The dataset of --data, --queries and --metric (empty: the dataset's own).
AnnDataset dataset_of(const std::string& name, size_t queries, const std::string& metric_text) {
  std::optional<Metric> metric;
  if (!metric_text.empty()) metric = parse_metric(metric_text);
  return load_ann_dataset(name, queries, metric);
}

void run_eval(const EvalArguments& args) {
  const AnnDataset data = dataset_of(args.data, args.queries, args.metric);
  AnnEvalConfig config;
  config.codecs = split_list(args.codecs, ';');
  config.ks = parse_sizes(args.ks, "--k");
  config.build_repetitions = args.repetitions;
  for (const std::string& baseline : split_list(args.baselines, ',')) {
    const bool all = baseline == "faiss";
    require(all || baseline == "faiss:PQ" || baseline == "faiss:PQfs" || baseline == "faiss:SQ",
            "--baselines: expected faiss (all) or faiss:PQ, faiss:PQfs, faiss:SQ, got '{}'", baseline);
    for (const std::string kind : {"PQ", "PQfs", "SQ"})
      if ((all || baseline == "faiss:" + kind) &&
          std::find(config.faiss.begin(), config.faiss.end(), kind) == config.faiss.end())
        config.faiss.push_back(kind);
  }
  config.threads = args.threads;
  config.seed = args.seed;
  config.rerank = args.rerank;
  config.center = !args.no_center;
  const auto rows = run_ann_eval(data, config);
  if (args.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows)
      out.push_back({{"codec", r.codec}, {"dataset", data.name}, {"metric", metric_name(data.metric)},
                     {"dim", data.base.cols}, {"base", data.base.rows}, {"queries", data.queries.rows},
                     {"bits", r.bits}, {"bytes_per_vector", r.bytes_per_vector},
                     {"recall_1_at_1", optional_number(r.recall_1_at_1)},
                     {"recall_1_at_10", optional_number(r.recall_1_at_10)},
                     {"recall_1_at_100", optional_number(r.recall_1_at_100)},
                     {"recall_10_at_10", optional_number(r.recall_10_at_10)}, {"build_s", r.build_s}, {"build_s_each", r.build_s_each},
                     {"ms_per_query", r.ms_per_query}, {"ms_per_query_batch", r.ms_per_query_batch}});
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format("{}: {} base x {} dims, {} queries, metric {}\n", data.name, data.base.rows,
                           data.base.cols, data.queries.rows, metric_name(data.metric));
  TextTable table({"<codec", "bits", "bytes", "1@1", "1@10", "1@100", "10@10", "build s", "ms/q", "ms/q bat"});
  for (const auto& r : rows)
    table.add({r.codec, fmt::format("{}", r.bits), std::to_string(r.bytes_per_vector), percent(r.recall_1_at_1),
               percent(r.recall_1_at_10), percent(r.recall_1_at_100), percent(r.recall_10_at_10),
               fmt::format("{:.3f}", r.build_s), fmt::format("{:.3f}", r.ms_per_query),
               fmt::format("{:.3f}", r.ms_per_query_batch)});
  table.print(std::cout);
}

void run_bench(const BenchArguments& args) {
  const AnnDataset data = dataset_of(args.data, args.queries, args.metric);
  AnnBenchConfig config;
  config.indexes = split_list(args.indexes, ';');
  config.nprobes = parse_sizes(args.nprobes, "--nprobe");
  config.ef_search = parse_sizes(args.ef, "--ef-search");
  config.threads.clear();
  for (const size_t t : parse_sizes(args.threads, "--threads")) {
    require(t >= 1 && t <= static_cast<size_t>(kMaxThreads), "--threads: {} is outside 1..{}", t, kMaxThreads);
    config.threads.push_back(static_cast<int>(t));
  }
  config.k = args.k;
  config.single_queries = args.single;
  config.repetitions = args.repetitions;
  const auto rows = run_ann_bench(data, config);
  if (args.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows)
      out.push_back({{"index", r.index}, {"dataset", data.name}, {"metric", metric_name(data.metric)},
                     {"dim", data.base.cols}, {"base", data.base.rows}, {"queries", data.queries.rows}, {"k", args.k},
                     {"parameter", r.parameter}, {"value", r.value}, {"threads", r.threads}, {"recall", r.recall},
                     {"qps_single", r.qps_single}, {"qps_batch", r.qps_batch}, {"train_s", r.train_s},
                     {"add_s", r.add_s}, {"bytes_per_vector", r.bytes_per_vector},
                     {"vector_bytes", r.vector_bytes}});
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format("{}: {} base x {} dims, {} queries, metric {}, recall@{}\n", data.name, data.base.rows,
                           data.base.cols, data.queries.rows, metric_name(data.metric), args.k);
  TextTable table({"<index", "<param", "value", "threads", "recall", "qps 1", "qps batch", "train s", "add s", "B/vec"});
  for (const auto& r : rows)
    table.add({r.index, r.parameter, std::to_string(r.value), std::to_string(r.threads), fmt::format("{:.3f}", r.recall),
               fmt::format("{:.0f}", r.qps_single), fmt::format("{:.0f}", r.qps_batch), fmt::format("{:.2f}", r.train_s),
               fmt::format("{:.2f}", r.add_s), fmt::format("{:.1f}", r.bytes_per_vector)});
  table.print(std::cout);
}

RerankStore parse_store(const std::string& name) {
  if (name == "none") return RerankStore::kNone;
  if (name == "fp16") return RerankStore::kFp16;
  if (name == "fp32") return RerankStore::kFp32;
  throw Error(fmt::format("--rerank-store: expected none, fp16 or fp32, got '{}'", name));
}

void run_build(const BuildArguments& args) {
  // A matrix file is indexed whole unless --queries holds its last rows out (as ann eval splits it).
  AnnDataset data;
  if (args.queries == 0 && is_matrix_file_dataset(args.data)) {
    data = {args.data, read_matrix(args.data), {}, parse_metric(args.metric)};
  } else {
    data = load_ann_dataset(args.data, args.queries, parse_metric(args.metric));
  }
  FlatIndexOptions options;
  options.codec = args.codec;
  options.metric = data.metric;
  options.seed = args.seed;
  options.threads = args.threads;
  options.rerank_store = parse_store(args.rerank_store);
  options.rerank_candidates = args.rerank;
  if (options.rerank_candidates > 0 && options.rerank_store == RerankStore::kNone)
    options.rerank_store = RerankStore::kFp16;
  FlatIndex index(data.base.cols, options);
  index.add(data.base.values.data(), data.base.rows);
  index.save(args.out);
  std::cout << fmt::format("{}: {} vectors x {} dims, codec {}, metric {}, {} bytes per vector ({} of codes)\n",
                           args.out, index.size(), index.dim(), index.codec().spec(), metric_name(data.metric),
                           index.bytes_per_vector(), index.code_bytes_per_vector());
}

void run_search(const SearchArguments& args) {
  FlatIndex index = FlatIndex::load(args.index);
  const Matrix queries = read_matrix(args.queries);
  require(queries.cols == index.dim(), "search: queries in {} have dimension {}, the index {}", args.queries,
          queries.cols, index.dim());
  const Neighbors found = index.search(queries.values.data(), queries.rows, args.k);
  if (args.json) {
    nlohmann::json out = nlohmann::json::array();
    for (size_t q = 0; q < found.queries; ++q)
      out.push_back({{"query", q},
                     {"ids", std::vector<int64_t>(found.ids.begin() + q * found.k, found.ids.begin() + (q + 1) * found.k)},
                     {"scores", std::vector<float>(found.scores.begin() + q * found.k,
                                                   found.scores.begin() + (q + 1) * found.k)}});
    std::cout << out.dump() << "\n";
    return;
  }
  for (size_t q = 0; q < found.queries; ++q) {
    std::cout << q;
    for (size_t r = 0; r < found.k; ++r) std::cout << '\t' << found.id(q, r);
    std::cout << '\n';
  }
}

}  // namespace

std::function<void()> add_ann_command(CLI::App& app) {
  auto* ann = app.add_subcommand("ann", "Nearest-neighbour search over TurboQuant codes (and FAISS baselines)");
  ann->require_subcommand(1);
  auto eval_args = std::make_shared<EvalArguments>();
  auto* eval = ann->add_subcommand("eval", "Recall, bytes and speed of codecs against exact search");
  eval->add_option("--data", eval_args->data,
                   "sift-5k | fashion-mnist | gaussian:d=D,n=N | FILE.hdf5 (ann-benchmarks) | a matrix file")
      ->required();
  eval->add_option("--codecs", eval_args->codecs, "Codec specs separated by ';' (default: tq_pca, tq_mse rescaled, tq_mse, "
                                                  "tq_prod at 2 and 4 bits)")
      ->check(NonEmptyList(';'));
  eval->add_option("--k", eval_args->ks, "Depths of recall 1@k (1, 10, 100)");
  eval->add_option("--queries", eval_args->queries, "Queries (one-file data: the last N rows; default 500)");
  eval->add_option("--metric", eval_args->metric, "ip | cosine | l2 (default: the dataset's)");
  eval->add_option("--baselines", eval_args->baselines, "faiss: FAISS PQ, PQ fast-scan and SQ at equal bytes (or a comma list of faiss:PQ, faiss:PQfs, faiss:SQ)");
  eval->add_option("--rerank", eval_args->rerank, "Re-rank this many candidates from stored fp16 vectors");
  eval->add_flag("--no-center", eval_args->no_center, "Quantize x itself, not x - mean (the index's default)");
  eval->add_option("--threads", eval_args->threads, "Threads (0 = all)")->check(CLI::Range(0, kMaxThreads));
  eval->add_option("--repetitions", eval_args->repetitions,
                   "Builds per codec, each from fresh memory; build_s is their median (FAISS: one)")
      ->check(CLI::Range(1, 100));
  eval->add_option("--seed", eval_args->seed, "Seed of the codecs' rotations");
  eval->add_flag("--json", eval_args->json, "JSON rows instead of a table");

  auto build_args = std::make_shared<BuildArguments>();
  auto bench_args = std::make_shared<BenchArguments>();
  auto* bench = ann->add_subcommand(
      "bench", "Sub-linear indexes (IVF, FAISS IVF/HNSW): recall@k against queries per second, build time, bytes");
  bench->add_option("--data", bench_args->data, "Dataset or matrix file, as in ann eval")->required();
  bench->add_option("--indexes", bench_args->indexes,
                    "Indexes separated by ';': ivf:...|CODEC factories, faiss:FACTORY (FAISS index_factory)")
      ->required();
  bench->add_option("--nprobe", bench_args->nprobes, "IVF curve: nprobe values (default 1,2,...,128; capped at nlist)");
  bench->add_option("--ef-search", bench_args->ef, "HNSW curve: efSearch values");
  bench->add_option("--threads", bench_args->threads, "Thread counts to time each point with (default 1,2)");
  bench->add_option("--k", bench_args->k, "Neighbours per query (recall@k)");
  bench->add_option("--queries", bench_args->queries, "Queries (one-file data: the last N rows; default 500)");
  bench->add_option("--metric", bench_args->metric, "ip | cosine | l2 (default: the dataset's)");
  bench->add_option("--single", bench_args->single, "Queries timed one per call (default 200)");
  bench->add_option("--repetitions", bench_args->repetitions, "Timed passes per point; the median is reported");
  bench->add_flag("--json", bench_args->json, "Print rows as JSON");

  auto* build = ann->add_subcommand("build", "Encode the base vectors of a dataset into an index file");
  build->add_option("--data", build_args->data, "Dataset or matrix file, as in ann eval")->required();
  build->add_option("--codec", build_args->codec, "Codec spec (default tq_pca:b=4)");
  build->add_option("--metric", build_args->metric, "ip | cosine | l2");
  build->add_option("--out", build_args->out, "Index file to write")->required();
  build->add_option("--queries", build_args->queries,
                    "Rows held out as queries: a matrix file's last N (default none: every row is indexed)");
  build->add_option("--rerank", build_args->rerank, "Re-rank this many candidates from stored vectors");
  build->add_option("--rerank-store", build_args->rerank_store, "none | fp16 | fp32 copies for re-ranking");
  build->add_option("--threads", build_args->threads, "Threads (0 = all)")->check(CLI::Range(0, kMaxThreads));
  build->add_option("--seed", build_args->seed, "Seed of the codec's rotation");

  auto search_args = std::make_shared<SearchArguments>();
  auto* search = ann->add_subcommand(
      "search",
      "Query an index file. Output: one line per query row, its number (from 0) and then the ids of its k nearest "
      "neighbours, best first, tab-separated; --json adds the scores (similarity for ip and cosine, squared "
      "distance for l2)");
  search->add_option("--index", search_args->index, "Index file from ann build")->required();
  search->add_option("--queries", search_args->queries, "Query vectors (any matrix file)")->required();
  search->add_option("--k", search_args->k, "Neighbours per query");
  search->add_flag("--json", search_args->json, "JSON: ids and scores per query");

  return [=] {
    if (eval->parsed()) run_eval(*eval_args);
    if (bench->parsed()) run_bench(*bench_args);
    if (build->parsed()) run_build(*build_args);
    if (search->parsed()) run_search(*search_args);
  };
}

}  // namespace kvsketch::tools
