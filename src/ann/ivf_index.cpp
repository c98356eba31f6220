#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "ann/ivf_state.hpp"
#include "ann/kmeans.hpp"
#include "ann/log_norm.hpp"
#include "core/require.hpp"
#include "core/thread_scope.hpp"
#include "kvsketch/half.hpp"
#include "kvsketch/limits.hpp"
#include "kvsketch/random.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {

IvfIndex::State::State(size_t dim_, IvfIndexOptions options_) : dim(dim_), options(std::move(options_)) {
  require(dim >= 1 && dim <= kMaxDim, "IvfIndex: dim must be in 1..{}, got {}", kMaxDim, dim);
  require(options.nlist >= 1 && options.nlist <= (size_t{1} << 20), "IvfIndex: nlist must be in 1..2^20, got {}",
          options.nlist);
  require(options.nprobe >= 1 && options.nprobe <= options.nlist, "IvfIndex: nprobe must be in 1..nlist = {}, got {}",
          options.nlist, options.nprobe);
  require(options.iterations <= 1000, "IvfIndex: iterations must be at most 1000, got {}", options.iterations);
  require(options.threads >= 0, "IvfIndex: threads must be >= 0, got {}", options.threads);
  codec = make_codec(options.codec, dim, options.seed);
  require(!codec->calibrated_by_data(),
          "IvfIndex: codec {} fits itself to data; the IVF index takes data-oblivious codecs (tq_mse, tq_prod, qjl, "
          "int8, ...)",
          options.codec);
  require(codec->row_group() == 1, "IvfIndex: codec {} encodes groups of rows; the lists need rows that stand alone",
          options.codec);
  require(options.k_factor >= 1 && options.k_factor <= 1024, "IvfIndex: k_factor must be in 1..1024, got {}",
          options.k_factor);
  fast_scan = options.fast_scan && FastScanStore::supports(*codec);
  const bool log_norms = options.norm == ListNorm::kLog8;
  require(!log_norms || fast_scan,
          "IvfIndex: norm=log8 needs fast-scan lists (tq_mse at 1, 2 or 4 bits, fast_scan=1), not {}{}", options.codec,
          options.fast_scan ? "" : " with fast_scan=0");
  lists.reserve(options.nlist);
  for (size_t c = 0; c < options.nlist; ++c) lists.emplace_back(*codec, fast_scan, log_norms, options.refine);
}

size_t IvfIndex::State::kept_by_codes(size_t k) const {
  return options.refine == Refine::kNone ? k : k * options.k_factor;
}

size_t IvfIndex::State::kept_by_scan(size_t k) const {
  // The integer scan keeps a wider shortlist for the codec's float tables to re-score.
  const size_t keep = kept_by_codes(k);
  return fast_scan ? 2 * keep + 32 : keep;
}

IvfList::IvfList(const VectorCodec& codec, bool fast_scan, bool log_norms, Refine refine_kind)
    : codes(codec.code_bytes()), refine(refine_kind, codec.dim()) {
  if (fast_scan) fast = std::make_unique<FastScanStore>(codec, log_norms);
}

void IvfList::append_codes(const CodeBuffer& encoded) {
  if (fast)
    fast->append(encoded);
  else
    codes.data().insert(codes.data().end(), encoded.data().begin(), encoded.data().end());
}

size_t IvfList::code_bytes_held() const { return fast ? fast->bytes() : codes.bytes(); }

void IvfList::keep(const std::vector<bool>& kept) {
  size_t out = 0;
  for (size_t row = 0; row < rows(); ++row) {
    if (!kept[row]) continue;
    if (out != row) {
      if (fast)
        fast->move_row(row, out);
      else
        std::copy_n(codes.row(row), codes.code_bytes(), codes.row(out));
      ids.mutate()[out] = ids[row];
      if (!norms.empty()) norms.mutate()[out] = norms[row];
    }
    ++out;
  }
  refine.keep(kept);
  if (fast)
    fast->truncate(out);
  else
    codes.resize(out);
  ids.mutate().resize(out);
  if (!norms.empty()) norms.mutate().resize(out);
}

const float* IvfIndex::State::prepared_rows(const float* x, size_t n, std::vector<float>& storage) const {
  if (options.metric != Metric::kCosine) return x;
  std::vector<float> rows(x, x + n * dim);
  for (size_t i = 0; i < n; ++i) {
    float* row = rows.data() + i * dim;
    const float norm = std::sqrt(simd::sum_of_squares(row, dim));
    require(norm > 0.0f, "IvfIndex: row {} is zero, which has no direction for the cosine metric", i);
    for (size_t j = 0; j < dim; ++j) row[j] /= norm;
  }
  storage = std::move(rows);
  return storage.data();
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
  std::vector<float> sample;  // the rows k-means reads, where they are not x itself
  const float* rows = x;
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
    rows = sample.data();
  }
  std::vector<float> prepared;
  rows = s.prepared_rows(rows, n, prepared);
  s.centroids = train_kmeans(rows, n, s.dim, nlist, s.options.iterations, s.options.seed);
  s.centroid_squares = squared_norms(s.centroids, s.dim);
  if (s.options.norm == ListNorm::kLog8) s.set_norm_scales(rows, n);
}

void IvfIndex::State::codec_input(const float* row, size_t list, float* out) const {
  const float* centroid = centroids.data() + list * dim;
  for (size_t j = 0; j < dim; ++j) out[j] = options.residual ? row[j] - centroid[j] : row[j];
}

void IvfIndex::State::set_norm_scales(const float* sample, size_t n) {
  // Each list's scale: from the norms of what the codec will store for the training vectors it
  // receives (their residuals, or themselves); a list that receives few takes the steps of the
  // scale of all of them.
  std::vector<uint32_t> assignment(n);
  assign_nearest(sample, n, dim, centroids, centroid_squares, assignment.data());
  std::vector<std::vector<float>> norms(options.nlist);
  std::vector<float> all(n), residual(dim);
  for (size_t i = 0; i < n; ++i) {
    codec_input(sample + i * dim, assignment[i], residual.data());
    all[i] = std::sqrt(simd::sum_of_squares(residual.data(), dim));
    norms[assignment[i]].push_back(all[i]);
  }
  const log_norm::Scale overall = log_norm::scale_of(all.data(), n, log_norm::Scale{});
  for (size_t c = 0; c < options.nlist; ++c)
    lists[c].fast->set_norm_scale(log_norm::scale_of(norms[c].data(), norms[c].size(), overall));
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
  std::vector<float> prepared;
  const float* rows = s.prepared_rows(x, n, prepared);
  std::vector<uint32_t> assignment(n);
  assign_nearest(rows, n, s.dim, s.centroids, s.centroid_squares, assignment.data());
  std::vector<uint16_t> norms(s.options.metric == Metric::kL2 ? n : 0);
  for (size_t i = 0; i < norms.size(); ++i) {
    const float norm = std::sqrt(simd::sum_of_squares(rows + i * s.dim, s.dim));
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
    for (size_t m = 0; m < members[c].size(); ++m)
      s.codec_input(rows + members[c][m] * s.dim, c, block.data() + m * s.dim);
    s.codec->encode(block.data(), members[c].size(), encoded[c]);
  }
  for (size_t c = 0; c < s.options.nlist; ++c) {
    if (members[c].empty()) continue;
    IvfList& list = s.lists[c];
    list.append_codes(encoded[c]);
    for (size_t i : members[c]) {
      list.ids.mutate().push_back(new_ids[i]);
      if (!norms.empty()) list.norms.mutate().push_back(norms[i]);
      list.refine.append(rows + i * s.dim, 1);
    }
  }
  s.rows += n;
  for (int64_t id : new_ids) s.next_id = std::max(s.next_id, id == INT64_MAX ? id : id + 1);
}

size_t IvfIndex::remove(const int64_t* ids, size_t n) {
  State& s = *state_;
  if (n == 0) return 0;
  require(ids != nullptr, "IvfIndex: remove: ids is null");
  const std::unordered_set<int64_t> doomed(ids, ids + n);
  size_t removed = 0;
  std::vector<bool> kept;
  for (IvfList& list : s.lists) {
    kept.assign(list.rows(), true);
    size_t doomed_here = 0;
    for (size_t i = 0; i < list.rows(); ++i)
      if (doomed.count(list.ids[i])) {
        kept[i] = false;
        ++doomed_here;
      }
    if (doomed_here == 0) continue;
    list.keep(kept);
    removed += doomed_here;
  }
  s.rows -= removed;
  return removed;
}

int64_t IvfIndex::first_present(const int64_t* ids, size_t n) const {
  if (n == 0) return -1;
  require(ids != nullptr, "IvfIndex: first_present: ids is null");
  const std::unordered_set<int64_t> wanted(ids, ids + n);
  std::unordered_set<int64_t> stored;
  for (const IvfList& list : state_->lists)
    for (int64_t id : list.ids)
      if (wanted.count(id)) stored.insert(id);
  for (size_t i = 0; i < n; ++i)
    if (stored.count(ids[i])) return ids[i];
  return -1;
}

size_t IvfIndex::bytes_per_vector() const {
  const State& s = *state_;
  return s.lists.front().stored_row_bytes() + sizeof(int64_t) + (s.options.metric == Metric::kL2 ? 2 : 0) +
         s.lists.front().refine.bytes_per_vector();
}

namespace {

template <typename T, typename Allocator>
size_t mapped_bytes_of(const ListArray<T, Allocator>& array) {
  return array.mapped() ? array.size() * sizeof(T) : 0;
}

}  // namespace

size_t IvfIndex::mapped_bytes() const {
  size_t total = 0;
  for (const IvfList& list : state_->lists) {
    if (list.fast) total += mapped_bytes_of(list.fast->block_bytes()) + mapped_bytes_of(list.fast->tail_bytes());
    total += mapped_bytes_of(list.ids) + mapped_bytes_of(list.norms) + mapped_bytes_of(list.refine.halves()) +
             mapped_bytes_of(list.refine.bytes()) + mapped_bytes_of(list.refine.scales());
  }
  return total;
}

size_t IvfIndex::bytes() const {
  const State& s = *state_;
  size_t total = (s.centroids.size() + s.centroid_squares.size()) * sizeof(float);
  if (s.options.norm == ListNorm::kLog8 && s.trained()) total += s.options.nlist * 8;  // the lists' norm scales
  for (const IvfList& list : s.lists)
    total += list.code_bytes_held() + list.ids.size() * sizeof(int64_t) + list.norms.size() * 2 +
             list.rows() * list.refine.bytes_per_vector();
  return total;
}

}  // namespace kvsketch
