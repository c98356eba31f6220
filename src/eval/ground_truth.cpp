// Exact k nearest neighbours by blocked float32 matrix products (Eigen), and the recall measures.

#include <Eigen/Core>
#include <cmath>
#include <limits>

#include "ann/top_k.hpp"
#include "core/team_size.hpp"
#include "eval/ann_eval_internal.hpp"
#include "core/require.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

constexpr size_t kQueryBlock = 64, kBaseBlock = 4096;

// Whether a true score is at least as good as the reference, up to float rounding.
bool as_good(float score, float reference, Metric metric) {
  const float slack = 1e-5f * std::max(std::fabs(reference), 1e-3f);
  return metric == Metric::kL2 ? score <= reference + slack : score >= reference - slack;
}

}  // namespace

Matrix unit_rows(const Matrix& m) {
  Matrix out = m;
  for (size_t i = 0; i < out.rows; ++i) {
    float* row = out.values.data() + i * out.cols;
    double square = 0.0;
    for (size_t j = 0; j < out.cols; ++j) square += static_cast<double>(row[j]) * row[j];
    const float scale = square > 0.0 ? static_cast<float>(1.0 / std::sqrt(square)) : 0.0f;
    for (size_t j = 0; j < out.cols; ++j) row[j] *= scale;
  }
  return out;
}

Neighbors exact_neighbors(const Matrix& base_in, const Matrix& queries_in, Metric metric, size_t k, int threads) {
  require(base_in.cols == queries_in.cols, "ground truth: base has dimension {}, queries {}", base_in.cols,
          queries_in.cols);
  require(k >= 1 && k <= base_in.rows, "ground truth: k must be in 1..{}, got {}", base_in.rows, k);
  check_threads(threads, "ground truth");
  const bool cosine = metric == Metric::kCosine;
  const Matrix base = cosine ? unit_rows(base_in) : base_in, queries = cosine ? unit_rows(queries_in) : queries_in;
  const size_t n = base.rows, nq = queries.rows, d = base.cols;
  const Eigen::Map<const RowMatrix> B(base.values.data(), static_cast<long>(n), static_cast<long>(d));
  const Eigen::Map<const RowMatrix> Q(queries.values.data(), static_cast<long>(nq), static_cast<long>(d));
  Eigen::VectorXf half_square = Eigen::VectorXf::Zero(static_cast<long>(n));
  if (metric == Metric::kL2) half_square = 0.5f * B.rowwise().squaredNorm();
  Neighbors out;
  out.queries = nq;
  out.k = k;
  out.ids.resize(nq * k);
  out.scores.resize(nq * k);
  const long blocks = static_cast<long>((nq + kQueryBlock - 1) / kQueryBlock);
#pragma omp parallel for schedule(dynamic, 1) num_threads(team_size(threads, static_cast<size_t>(blocks)))
  for (long block = 0; block < blocks; ++block) {
    const size_t first = static_cast<size_t>(block) * kQueryBlock, count = std::min(kQueryBlock, nq - first);
    std::vector<TopK> tops(count, TopK(k));
    for (size_t b0 = 0; b0 < n; b0 += kBaseBlock) {
      const size_t bn = std::min(kBaseBlock, n - b0);
      RowMatrix similarity = Q.middleRows(static_cast<long>(first), static_cast<long>(count)) *
                             B.middleRows(static_cast<long>(b0), static_cast<long>(bn)).transpose();
      similarity.rowwise() -= half_square.segment(static_cast<long>(b0), static_cast<long>(bn)).transpose();
      for (size_t q = 0; q < count; ++q)
        for (size_t i = 0; i < bn; ++i)
          tops[q].push({similarity(static_cast<long>(q), static_cast<long>(i)), static_cast<uint32_t>(b0 + i)});
    }
    for (size_t q = 0; q < count; ++q) {
      const std::vector<ScoredRow> best = tops[q].take_sorted();
      const float query_square = metric == Metric::kL2 ? Q.row(static_cast<long>(first + q)).squaredNorm() : 0.0f;
      for (size_t r = 0; r < k; ++r) {
        out.ids[(first + q) * k + r] = best[r].row;
        out.scores[(first + q) * k + r] = metric == Metric::kL2 ? query_square - 2.0f * best[r].score : best[r].score;
      }
    }
  }
  return out;
}

std::vector<float> exact_scores(const Matrix& base, const Matrix& queries, const Neighbors& found, Metric metric) {
  std::vector<float> scores(found.queries * found.k);
  const size_t d = base.cols;
  std::vector<float> q(d), x(d);
  for (size_t i = 0; i < found.queries; ++i) {
    std::copy_n(queries.row(i), d, q.data());
    if (metric == Metric::kCosine) q = unit_rows(Matrix{1, d, q}).values;
    for (size_t r = 0; r < found.k; ++r) {
      const int64_t id = found.id(i, r);
      require(id >= -1 && id < static_cast<int64_t>(base.rows), "recall: result id {} is not a base row", id);
      if (id == -1) {  // no result in this place (too few vectors in the lists probed): never a hit
        scores[i * found.k + r] = metric == Metric::kL2 ? std::numeric_limits<float>::infinity()
                                                        : -std::numeric_limits<float>::infinity();
        continue;
      }
      std::copy_n(base.row(static_cast<size_t>(id)), d, x.data());
      float score;
      if (metric == Metric::kL2) {
        score = 0.0f;
        for (size_t j = 0; j < d; ++j) score += (q[j] - x[j]) * (q[j] - x[j]);
      } else {
        if (metric == Metric::kCosine) x = unit_rows(Matrix{1, d, x}).values;
        score = simd::dot(q.data(), x.data(), d);
      }
      scores[i * found.k + r] = score;
    }
  }
  return scores;
}

double recall_1_at_k(const Neighbors& truth, const std::vector<float>& true_scores, const Neighbors& found, size_t k,
                     Metric metric) {
  require(k >= 1 && k <= found.k && truth.queries == found.queries, "recall 1@{}: {} results per query", k, found.k);
  size_t hits = 0;
  for (size_t q = 0; q < found.queries; ++q)
    for (size_t r = 0; r < k; ++r)
      if (found.id(q, r) == truth.id(q, 0) || as_good(true_scores[q * found.k + r], truth.score(q, 0), metric)) {
        ++hits;
        break;
      }
  return static_cast<double>(hits) / static_cast<double>(found.queries);
}

double recall_k_at_k(const Neighbors& truth, const std::vector<float>& true_scores, const Neighbors& found, size_t k,
                     Metric metric) {
  require(k >= 1 && k <= found.k && k <= truth.k && truth.queries == found.queries, "recall {}@{}: {} results", k, k,
          found.k);
  size_t hits = 0;
  for (size_t q = 0; q < found.queries; ++q)
    for (size_t r = 0; r < k; ++r) hits += as_good(true_scores[q * found.k + r], truth.score(q, k - 1), metric);
  return static_cast<double>(hits) / static_cast<double>(found.queries * k);
}

}  // namespace kvsketch
