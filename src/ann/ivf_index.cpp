#include <omp.h>

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "ann/ivf_state.hpp"
#include "ann/kmeans.hpp"
#include "ann/top_k.hpp"
#include "core/require.hpp"
#include "kvsketch/half.hpp"
#include "kvsketch/limits.hpp"
#include "kvsketch/random.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {
namespace {

// options.threads for the scope of a call, as FlatIndex does.
class ThreadScope {
 public:
  explicit ThreadScope(int threads) : before_(omp_get_max_threads()) {
    if (threads > 0) omp_set_num_threads(threads);
  }
  ~ThreadScope() { omp_set_num_threads(before_); }

 private:
  int before_;
};

}  // namespace

IvfIndex::State::State(size_t dim_, IvfIndexOptions options_) : dim(dim_), options(std::move(options_)) {
  require(dim >= 1 && dim <= kMaxDim, "IvfIndex: dim must be in 1..{}, got {}", kMaxDim, dim);
  require(options.nlist >= 1 && options.nlist <= (size_t{1} << 20), "IvfIndex: nlist must be in 1..2^20, got {}",
          options.nlist);
  require(options.nprobe >= 1, "IvfIndex: nprobe must be >= 1");
  require(options.iterations <= 1000, "IvfIndex: iterations must be at most 1000, got {}", options.iterations);
  require(options.threads >= 0, "IvfIndex: threads must be >= 0, got {}", options.threads);
  codec = make_codec(options.codec, dim, options.seed);
  require(!codec->calibrated_by_data(),
          "IvfIndex: codec {} fits itself to data; the IVF index takes data-oblivious codecs (tq_mse, tq_prod, qjl, "
          "int8, ...)",
          options.codec);
  require(codec->row_group() == 1, "IvfIndex: codec {} encodes groups of rows; the lists need rows that stand alone",
          options.codec);
  lists.resize(options.nlist);
  for (IvfList& list : lists) list.codes = CodeBuffer(codec->code_bytes());
}

std::vector<float> IvfIndex::State::prepared_rows(const float* x, size_t n) const {
  std::vector<float> rows(x, x + n * dim);
  if (options.metric != Metric::kCosine) return rows;
  for (size_t i = 0; i < n; ++i) {
    float* row = rows.data() + i * dim;
    const float norm = std::sqrt(simd::sum_of_squares(row, dim));
    require(norm > 0.0f, "IvfIndex: row {} is zero, which has no direction for the cosine metric", i);
    for (size_t j = 0; j < dim; ++j) row[j] /= norm;
  }
  return rows;
}

IvfIndex::IvfIndex(size_t dim, IvfIndexOptions options) : state_(std::make_unique<State>(dim, std::move(options))) {}
IvfIndex::IvfIndex(IvfIndex&&) noexcept = default;
IvfIndex& IvfIndex::operator=(IvfIndex&&) noexcept = default;
IvfIndex::~IvfIndex() = default;

size_t IvfIndex::dim() const { return state_->dim; }
size_t IvfIndex::size() const { return state_->rows; }
bool IvfIndex::trained() const { return state_->trained(); }
const IvfIndexOptions& IvfIndex::options() const { return state_->options; }
const VectorCodec& IvfIndex::codec() const { return *state_->codec; }

std::vector<size_t> IvfIndex::list_sizes() const {
  std::vector<size_t> sizes;
  for (const IvfList& list : state_->lists) sizes.push_back(list.ids.size());
  return sizes;
}

void IvfIndex::train(const float* x, size_t n) {
  State& s = *state_;
  require(!s.trained(), "IvfIndex: train: the index is trained already");
  const size_t nlist = s.options.nlist;
  require(n >= nlist, "IvfIndex: train needs at least nlist = {} vectors, got {}", nlist, n);
  require(x != nullptr, "IvfIndex: train: x is null");
  require_finite_rows(x, n, s.dim, "IvfIndex train");
  const ThreadScope threads(s.options.threads);
  const size_t cap = s.options.max_train ? s.options.max_train : 64 * nlist;
  std::vector<float> sample;
  if (n > cap) {  // a seeded subsample, in row order
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    RandomStream random(s.options.seed, StreamPurpose::kCoarseQuantizer, {n, cap, 1});
    for (size_t i = 0; i < cap; ++i) std::swap(order[i], order[i + random.below(n - i)]);
    order.resize(std::max(cap, nlist));
    std::sort(order.begin(), order.end());
    sample.reserve(order.size() * s.dim);
    for (size_t i : order) sample.insert(sample.end(), x + i * s.dim, x + (i + 1) * s.dim);
    n = order.size();
  } else {
    sample.assign(x, x + n * s.dim);
  }
  sample = s.prepared_rows(sample.data(), n);
  s.centroids = train_kmeans(sample.data(), n, s.dim, nlist, s.options.iterations, s.options.seed);
  s.centroid_squares = squared_norms(s.centroids, s.dim);
}

void IvfIndex::add(const float* x, size_t n, const int64_t* ids) {
  State& s = *state_;
  if (n == 0) return;
  require(s.trained(), "IvfIndex: add before train");
  require(x != nullptr, "IvfIndex: add: x is null");
  require(s.rows + n <= UINT32_MAX, "IvfIndex: at most {} vectors", UINT32_MAX);
  require_finite_rows(x, n, s.dim, "IvfIndex add");
  require(ids || s.next_id <= INT64_MAX - static_cast<int64_t>(n),
          "IvfIndex: add: default ids would pass 2^63 - 1 (the largest id added is {}); give ids", s.next_id - 1);
  std::vector<int64_t> new_ids(n);
  for (size_t i = 0; i < n; ++i) {
    new_ids[i] = ids ? ids[i] : s.next_id + static_cast<int64_t>(i);
    require(new_ids[i] >= 0, "IvfIndex: add: row {} has negative id {}", i, new_ids[i]);
  }
  if (ids) {  // given ids: distinct, and none stored already
    std::unordered_set<int64_t> seen(new_ids.begin(), new_ids.end());
    require(seen.size() == n, "IvfIndex: add: the given ids repeat an id");
    for (const IvfList& list : s.lists)
      for (int64_t id : list.ids) require(!seen.count(id), "IvfIndex: add: id {} is already taken", id);
  }
  const ThreadScope threads(s.options.threads);
  std::vector<float> rows = s.prepared_rows(x, n);
  std::vector<uint32_t> assignment(n);
  assign_nearest(rows.data(), n, s.dim, s.centroids, s.centroid_squares, assignment.data());
  std::vector<uint16_t> norms(s.options.metric == Metric::kL2 ? n : 0);
  for (size_t i = 0; i < norms.size(); ++i) {
    const float norm = std::sqrt(simd::sum_of_squares(rows.data() + i * s.dim, s.dim));
    require(norm <= kHalfMax, "IvfIndex: add: row {} has norm {}, beyond the fp16 norms of metric l2", i, norm);
    norms[i] = float_to_half(norm);
  }
  // Every list's new codes are made before any list changes: a refused row changes nothing.
  std::vector<std::vector<size_t>> members(s.options.nlist);
  for (size_t i = 0; i < n; ++i) members[assignment[i]].push_back(i);
  std::vector<CodeBuffer> encoded(s.options.nlist, CodeBuffer(s.codec->code_bytes()));
  std::vector<float> block;
  for (size_t c = 0; c < s.options.nlist; ++c) {
    if (members[c].empty()) continue;
    block.resize(members[c].size() * s.dim);
    const float* centroid = s.centroids.data() + c * s.dim;
    for (size_t m = 0; m < members[c].size(); ++m) {
      const float* row = rows.data() + members[c][m] * s.dim;
      float* out = block.data() + m * s.dim;
      for (size_t j = 0; j < s.dim; ++j) out[j] = s.options.residual ? row[j] - centroid[j] : row[j];
    }
    s.codec->encode(block.data(), members[c].size(), encoded[c]);
  }
  for (size_t c = 0; c < s.options.nlist; ++c) {
    if (members[c].empty()) continue;
    IvfList& list = s.lists[c];
    list.codes.data().insert(list.codes.data().end(), encoded[c].data().begin(), encoded[c].data().end());
    for (size_t i : members[c]) {
      list.ids.push_back(new_ids[i]);
      if (!norms.empty()) list.norms.push_back(norms[i]);
    }
  }
  s.rows += n;
  for (int64_t id : new_ids) s.next_id = std::max(s.next_id, id == INT64_MAX ? id : id + 1);
}

Neighbors IvfIndex::search(const float* queries, size_t nq, size_t k, size_t nprobe) const {
  const State& s = *state_;
  require(s.trained(), "IvfIndex: search before train");
  require(k >= 1 && k <= s.rows, "IvfIndex: search: k must be in 1..size() = {}, got {}", s.rows, k);
  require(nq == 0 || queries != nullptr, "IvfIndex: search: queries is null");
  require_finite(queries, nq, s.dim, "IvfIndex search queries");
  const size_t probes = std::min(nprobe ? nprobe : s.options.nprobe, s.options.nlist);
  const std::vector<float> prepared_queries = s.prepared_rows(queries, nq);
  Neighbors out;
  out.queries = nq;
  out.k = k;
  out.ids.assign(nq * k, -1);
  out.scores.assign(nq * k, -std::numeric_limits<float>::infinity());
  const ThreadScope threads(s.options.threads);
  const bool l2 = s.options.metric == Metric::kL2;
#pragma omp parallel
  {
    std::vector<float> scores;
    std::vector<int64_t> candidate_ids;
#pragma omp for schedule(dynamic, 1)
    for (size_t qi = 0; qi < nq; ++qi) {
      const float* q = prepared_queries.data() + qi * s.dim;
      // The lists to scan: the best centroids by the metric's similarity.
      TopK lists(probes);
      std::vector<float> centroid_dot(s.options.nlist);
      for (size_t c = 0; c < s.options.nlist; ++c) {
        centroid_dot[c] = simd::fixed_order_dot(q, s.centroids.data() + c * s.dim, s.dim);
        const float similarity = l2 ? 2.0f * centroid_dot[c] - s.centroid_squares[c] : centroid_dot[c];
        lists.push({similarity, static_cast<uint32_t>(c)});
      }
      const auto prepared = s.codec->prepare(q);
      TopK best(k);
      candidate_ids.clear();
      for (const ScoredRow& probe : lists.take_sorted()) {
        const IvfList& list = s.lists[probe.row];
        const size_t rows = list.ids.size();
        if (rows == 0) continue;
        scores.resize(rows);
        s.codec->scores(*prepared, list.codes, 0, rows, scores.data());
        const float offset = s.options.residual ? centroid_dot[probe.row] : 0.0f;
        for (size_t i = 0; i < rows; ++i) {
          const float dot = offset + scores[i];
          float similarity = dot;
          if (l2) {
            const float norm = half_to_float(list.norms[i]);
            similarity = 2.0f * dot - norm * norm;
          }
          best.push({similarity, static_cast<uint32_t>(candidate_ids.size())});
          candidate_ids.push_back(list.ids[i]);
        }
      }
      const std::vector<ScoredRow> kept = best.take_sorted();
      for (size_t r = 0; r < kept.size(); ++r) {
        out.ids[qi * k + r] = candidate_ids[kept[r].row];
        out.scores[qi * k + r] = kept[r].score;
      }
    }
  }
  return out;
}

size_t IvfIndex::remove(const int64_t* ids, size_t n) {
  State& s = *state_;
  if (n == 0) return 0;
  require(ids != nullptr, "IvfIndex: remove: ids is null");
  const std::unordered_set<int64_t> doomed(ids, ids + n);
  size_t removed = 0;
  const size_t bytes = s.codec->code_bytes();
  for (IvfList& list : s.lists) {
    size_t kept = 0;
    for (size_t i = 0; i < list.ids.size(); ++i) {
      if (doomed.count(list.ids[i])) continue;
      if (kept != i) {
        list.ids[kept] = list.ids[i];
        if (!list.norms.empty()) list.norms[kept] = list.norms[i];
        std::copy_n(list.codes.row(i), bytes, list.codes.row(kept));
      }
      ++kept;
    }
    removed += list.ids.size() - kept;
    list.ids.resize(kept);
    if (!list.norms.empty()) list.norms.resize(kept);
    list.codes.resize(kept);
  }
  s.rows -= removed;
  return removed;
}

size_t IvfIndex::bytes_per_vector() const {
  return state_->codec->code_bytes() + sizeof(int64_t) + (state_->options.metric == Metric::kL2 ? 2 : 0);
}

size_t IvfIndex::bytes() const {
  return size() * bytes_per_vector() + (state_->centroids.size() + state_->centroid_squares.size()) * sizeof(float);
}

}  // namespace kvsketch
