// Evaluation of nearest-neighbour search: datasets (files, the bundled SIFT sample, Fashion-MNIST,
// synthetic Gaussian), exact ground truth, and the recall/speed rows of `kvsketch ann eval`.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "kvsketch/ann.hpp"
#include "kvsketch/eval/datasets.hpp"

namespace kvsketch {

struct AnnDataset {
  std::string name;
  Matrix base, queries;
  Metric metric = Metric::kL2;
};

// NAME_OR_FILE:
//   sift-5k                       the bundled SIFT sample (l2); the last `queries` rows are queries
//   fashion-mnist                 /usr/share/datasets/fashion-mnist: 60,000 train images as base,
//                                 the first `queries` of the 10,000 t10k images as queries (l2)
//   gaussian:d=D,n=N[,seed=S]     N unit-norm Gaussian vectors + `queries` more (ip)
//   FILE.hdf5                     ann-benchmarks: train / test (metric from the file name:
//                                 -angular -> cosine, -euclidean -> l2, -dot -> ip)
//   any other matrix file         split like sift-5k
// `queries` = 0 keeps all of a separate query set. metric overrides the dataset's own when given.
AnnDataset load_ann_dataset(const std::string& name_or_file, size_t queries, std::optional<Metric> metric = {});

// Whether NAME_OR_FILE is "any other matrix file" above (split by `queries`) rather than a dataset
// with a base of its own.
bool is_matrix_file_dataset(const std::string& name_or_file);

// The true k nearest rows of base for each query (float32 arithmetic, multithreaded; ties to the
// lower row). Scores as FlatIndex::search returns them (similarity, or squared distance for l2).
Neighbors exact_neighbors(const Matrix& base, const Matrix& queries, Metric metric, size_t k, int threads = 0);

// Recall of found against truth (both best first): recall_1_at_k, the fraction of queries whose
// true nearest neighbour is among the first k found (k <= found.k; a found row exactly as near
// counts, for duplicates), and recall_k_at_k as in ann-benchmarks, the fraction of the first k
// found whose true score is within the k-th true one. true_scores: exact scores of found's ids
// (queries x found.k, from exact_scores).
double recall_1_at_k(const Neighbors& truth, const std::vector<float>& true_scores, const Neighbors& found, size_t k,
                     Metric metric);
double recall_k_at_k(const Neighbors& truth, const std::vector<float>& true_scores, const Neighbors& found, size_t k,
                     Metric metric);
// The exact scores of found's ids (rows of base), queries x found.k.
std::vector<float> exact_scores(const Matrix& base, const Matrix& queries, const Neighbors& found, Metric metric);

struct AnnEvalConfig {
  std::vector<std::string> codecs;  // empty: the default list
  std::vector<size_t> ks = {1, 10, 100};
  // FAISS baselines to run: any of "PQ", "PQfs", "SQ" (empty: none).
  std::vector<std::string> faiss;
  int threads = 0;
  uint64_t seed = 0;
  size_t rerank = 0;                 // candidates re-ranked from stored fp16 copies (0 = off)
  bool center = true;                // FlatIndexOptions::center
  size_t timed_single_queries = 200;  // single-query timing over this many queries at most
  // Our indexes are built this many times, each from fresh memory; build_s is the median (noisy
  // machines). FAISS baselines are built once (their training takes minutes).
  size_t build_repetitions = 1;
};

struct AnnEvalRow {
  std::string codec;
  double bits = 0;                 // code bits per coordinate (codec's nominal b)
  size_t bytes_per_vector = 0;     // everything stored per vector except the id
  std::optional<double> recall_1_at_1, recall_1_at_10, recall_1_at_100, recall_10_at_10;
  double build_s = 0, ms_per_query = 0, ms_per_query_batch = 0;
  std::vector<double> build_s_each;  // every timed build, in order (one for FAISS)
};

std::vector<std::string> default_ann_codecs();
std::vector<AnnEvalRow> run_ann_eval(const AnnDataset& data, const AnnEvalConfig& config);

}  // namespace kvsketch
