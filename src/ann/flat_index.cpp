#include <omp.h>

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "codec/codec_base.hpp"
#include "ann/fast_scan_store.hpp"
#include "ann/top_k.hpp"
#include "core/huge_pages.hpp"
#include "core/team_size.hpp"
#include "core/thread_scope.hpp"
#include "kvsketch/ann.hpp"
#include "core/require.hpp"
#include "kvsketch/half.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {
namespace {

// Queries scored together: each chunk of codes is read from memory once for all of them. The fast
// scan's byte tables are small (16 bytes per group), so it takes more queries per pass.
constexpr size_t kQueryGroup = 8, kFastScanQueryGroup = 32;
constexpr size_t kChunkRows = 256;    // rows scored per kernel call; ranges are whole chunks
constexpr size_t kMinRangeRows = 16384;     // below this a query's rows are not split across threads
constexpr size_t kAddChunkBytes = 1 << 20;  // floats prepared per step of add: stays in L2
constexpr size_t kCalibrationRows = 4096;   // the first rows added: the centre and the codec's calibration

void push_scores(TopK& top, const float* scores, size_t first, size_t count) {
  float threshold = top.threshold();
  for (size_t i = 0; i < count; ++i)
    if (!(scores[i] < threshold)) {  // NaN too, which push ranks as -infinity
      top.push({scores[i], static_cast<uint32_t>(first + i)});
      threshold = top.threshold();
    }
}

}  // namespace

FlatIndex::FlatIndex(size_t dim, const FlatIndexOptions& options) : dim_(dim), options_(options) {
  check_threads(options.threads, "index");
  require(dim >= 2 && dim <= kMaxDim, "index: dimension must be in 2..{}, got {}", kMaxDim, dim);
  codec_ = make_codec(options.codec, dim, options.seed);
  codes_ = codec_->make_buffer();
  require(codec_->row_group() == 1,
          "index: codec '{}' encodes rows in groups of {}; an index needs codes that stand alone per vector",
          codec_->spec(), codec_->row_group());
  require(options.rerank_candidates == 0 || options.rerank_store != RerankStore::kNone,
          "index: re-ranking {} candidates needs stored vectors (rerank_store fp16 or fp32)", options.rerank_candidates);
  require(options.threads >= 0, "index: threads must be >= 0 (0 = all), got {}", options.threads);
  options_.codec = codec_->spec();
  fast_scan_requested_ = options.fast_scan;
  choose_layout();
}

void FlatIndex::choose_layout() {
  fast_.reset();
  if (fast_scan_requested_ && FastScanStore::supports(*codec_)) fast_ = std::make_unique<FastScanStore>(*codec_);
  options_.fast_scan = fast_ != nullptr;
}

FlatIndex::FlatIndex(FlatIndex&&) noexcept = default;
FlatIndex::~FlatIndex() = default;

size_t FlatIndex::code_bytes_per_vector() const {
  return fast_ ? fast_->bytes_per_vector() : codec_->code_bytes();
}

size_t FlatIndex::calibration_bytes() const { return codec_->calibration().size() + 4 * center_.size(); }

size_t FlatIndex::bytes_per_vector() const {
  size_t bytes = code_bytes_per_vector();
  if (options_.metric == Metric::kL2) bytes += 2;
  if (options_.rerank_store == RerankStore::kFp16) bytes += 2 * dim_;
  if (options_.rerank_store == RerankStore::kFp32) bytes += 4 * dim_;
  return bytes;
}

void FlatIndex::prepare_rows(const float* x, size_t first, size_t count, std::vector<float>& rows,
                             std::vector<float>& squared_norms) const {
  reserve_huge(rows, count * dim_);  // the calibration rows are tens of MB: few faults
  rows.resize(count * dim_);
  squared_norms.resize(count);
  const float* centre = center_.empty() ? nullptr : center_.data();
  for (size_t i = 0; i < count; ++i) {
    float* row = rows.data() + i * dim_;
    const float* in = x + (first + i) * dim_;
    if (options_.metric == Metric::kCosine) {
      std::copy_n(in, dim_, row);
      const float norm = std::sqrt(simd::sum_of_squares(row, dim_));
      if (!std::isfinite(norm)) require_finite(row, 1, dim_, "vectors", first + i);
      require(std::isfinite(norm), "add: row {} has a norm beyond the float range", first + i);
      require(norm > 0.0f, "add: row {} is the zero vector, which has no direction (metric cosine)", first + i);
      for (size_t j = 0; j < dim_; ++j) row[j] /= norm;
      in = row;
    }
    // row - c (a copy without a centre), rounded once: the same bits on every target; its squared
    // norm from the same pass, for the codec and the l2 norms.
    squared_norms[i] = simd::subtract_sum_of_squares(in, centre, row, dim_);
  }
}

void FlatIndex::add(const float* x, size_t n, const int64_t* ids) {
  if (n == 0) return;
  require(size() + n <= UINT32_MAX, "index: at most {} vectors, got {} more on {}", UINT32_MAX, n, size());
  require(ids || next_id_ <= INT64_MAX - static_cast<int64_t>(n),
          "add: default ids would pass 2^63 - 1 (the largest id added is {}); give ids", next_id_ - 1);
  std::vector<int64_t> new_ids(n);
  std::unordered_set<int64_t> seen;
  if (ids) seen.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    new_ids[i] = ids ? ids[i] : next_id_ + static_cast<int64_t>(i);
    // Default ids are distinct among themselves; any id may clash with a stored (explicit) one.
    require(new_ids[i] >= 0, "add: row {} has negative id {}", i, new_ids[i]);
    require(!contains(new_ids[i]) && (!ids || seen.insert(new_ids[i]).second),
            "add: row {} has id {}, which is already taken", i, new_ids[i]);
  }
  // Encoding runs on options.threads threads (the codec parallelizes over blocks of rows).
  const ThreadScope threads(options_.threads);

  const size_t old = size();
  const bool first_centre = options_.center && center_.empty();
  const bool calibrate = codec_->calibrated_by_data() && !calibrated_;
  const std::vector<uint8_t> calibration_before = codec_->calibration();
  std::vector<float> rows;  // one chunk of rows as stored: unit vectors for cosine, minus the centre
  std::vector<float> squares;  // their squared norms
  CodeBuffer encoded = codec_->make_buffer();
  try {
    // The first vectors added (up to kCalibrationRows) give the centre and calibrate a
    // data-dependent codec (center:, outlier split): one pass, no iterations.
    if (first_centre || calibrate) {
      const size_t count = std::min(n, kCalibrationRows);
      prepare_rows(x, 0, count, rows, squares);
      if (first_centre) {
        std::vector<double> sum(dim_, 0.0);
        for (size_t i = 0; i < count; ++i) simd::add_to_double_sums(rows.data() + i * dim_, sum.data(), dim_);
        // NaN or Inf anywhere makes its column's sum non-finite (finite floats cannot overflow a
        // double sum): only then the row-by-row check, for its message.
        if (!std::all_of(sum.begin(), sum.end(), [](double v) { return std::isfinite(v); }))
          require_finite(rows.data(), count, dim_, "vectors");
        center_.resize(dim_);
        for (size_t j = 0; j < dim_; ++j) center_[j] = static_cast<float>(sum[j] / static_cast<double>(count));
        for (size_t i = 0; i < count; ++i) {
          float* row = rows.data() + i * dim_;
          squares[i] = simd::subtract_sum_of_squares(row, center_.data(), row, dim_);
        }
      } else {
        require_finite(rows.data(), count, dim_, "vectors");
      }
      if (calibrate) codec_->calibrate(rows.data(), count);
      if (calibrate && old == 0) choose_layout();  // tq_pca scans the fast layout only without a basis
    }
    // Room for the whole batch up front (growing geometrically): no reallocation while chunks arrive.
    const size_t room = std::max(old + n, 2 * old);
    if (fast_) fast_->reserve(room);
    if (!fast_ && codes_.data().capacity() < (old + n) * codec_->code_bytes())
      codes_.data().reserve(room * codec_->code_bytes());
    if (options_.metric == Metric::kL2 && norms_.capacity() < old + n) norms_.reserve(room);
    // Chunks through one small buffer (no copy of a large batch); a refused chunk takes back
    // the ones stored before it, so a refused add changes nothing.
    // Whole fast-scan blocks of 32 rows per chunk, so that chunks transpose block by block.
    const size_t chunk_rows = std::max<size_t>(64, kAddChunkBytes / (4 * dim_) / 32 * 32);
    // The calibration's rows are already prepared (the same operations): chunks inside them are
    // encoded from there, not read from x again.
    const size_t calibration_rows = first_centre || calibrate ? std::min(n, kCalibrationRows) : 0;
    for (size_t first = 0; first < n; first += chunk_rows) {
      const size_t count = std::min(chunk_rows, n - first);
      const bool calibration_chunk = first + count <= calibration_rows;
      if (!calibration_chunk) prepare_rows(x, first, count, rows, squares);
      const float* prepared = rows.data() + (calibration_chunk ? first * dim_ : 0);
      const float* prepared_squares = squares.data() + (calibration_chunk ? first : 0);
      if (options_.metric == Metric::kL2)
        for (size_t i = 0; i < count; ++i) {
          const float norm = std::sqrt(prepared_squares[i]);
          if (!std::isfinite(norm)) require_finite(x + (first + i) * dim_, 1, dim_, "vectors", first + i);
          require(std::isfinite(norm), "add: row {} has a norm beyond the float range", first + i);
          require(norm <= kHalfMax, "add: row {} has norm {}, beyond the fp16 range of the stored L2 norm",
                  first + i, norm);
          norms_.push_back(float_to_half(norm));
        }
      if (options_.rerank_store == RerankStore::kFp16)
        for (size_t i = 0; i < count * dim_; ++i)
          require(std::fabs(prepared[i]) <= kHalfMax,
                  "add: row {} column {} is {}, beyond the fp16 range of the stored copy", first + i / dim_,
                  i % dim_, prepared[i]);
      encoded.clear();
      try {
        codec_->encode(prepared, count, encoded, prepared_squares);
      } catch (const Error& e) {
        throw Error(fmt::format("add: rows from {}: {}", first, e.what()));
      }
      if (fast_)
        fast_->append(encoded);
      else
        codes_.data().insert(codes_.data().end(), encoded.data().begin(), encoded.data().end());
      if (options_.rerank_store == RerankStore::kFp16)
        for (size_t i = 0; i < count * dim_; ++i) copy16_.push_back(float_to_half(prepared[i]));
      if (options_.rerank_store == RerankStore::kFp32) copy32_.insert(copy32_.end(), prepared, prepared + count * dim_);
    }
  } catch (...) {
    if (first_centre) center_.clear();
    if (calibrate) codec_->set_calibration(calibration_before);
    if (calibrate && old == 0) choose_layout();
    if (fast_)
      fast_->truncate(old);
    else
      codes_.resize(old);
    if (!norms_.empty()) norms_.resize(old);
    copy16_.resize(copy16_.empty() ? 0 : old * dim_);
    copy32_.resize(copy32_.empty() ? 0 : old * dim_);
    throw;
  }
  calibrated_ = calibrated_ || calibrate;
  ids_.insert(ids_.end(), new_ids.begin(), new_ids.end());
  position_.reserve(old + n);
  for (size_t i = 0; i < n; ++i) position_[new_ids[i]] = old + i;
  for (const int64_t id : new_ids) next_id_ = std::max(next_id_, id == INT64_MAX ? id : id + 1);
}

size_t FlatIndex::remove(const int64_t* ids, size_t n) {
  size_t removed = 0;
  const size_t code = codec_->code_bytes();
  for (size_t r = 0; r < n; ++r) {
    const auto found = position_.find(ids[r]);
    if (found == position_.end()) continue;
    // The last row moves into the hole.
    const size_t hole = found->second, last = size() - 1;
    position_.erase(found);
    if (hole != last) {
      if (fast_)
        fast_->move_row(last, hole);
      else
        std::copy_n(codes_.row(last), code, codes_.row(hole));
      ids_[hole] = ids_[last];
      position_[ids_[hole]] = hole;
      if (!norms_.empty()) norms_[hole] = norms_[last];
      if (!copy16_.empty()) std::copy_n(copy16_.begin() + last * dim_, dim_, copy16_.begin() + hole * dim_);
      if (!copy32_.empty()) std::copy_n(copy32_.begin() + last * dim_, dim_, copy32_.begin() + hole * dim_);
    }
    if (fast_)
      fast_->truncate(last);
    else
      codes_.resize(last);
    ids_.pop_back();
    if (!norms_.empty()) norms_.pop_back();
    if (!copy16_.empty()) copy16_.resize(last * dim_);
    if (!copy32_.empty()) copy32_.resize(last * dim_);
    ++removed;
  }
  return removed;
}

std::vector<float> FlatIndex::prepared_queries(const float* queries, size_t nq) const {
  require_finite_rows(queries, nq, dim_, "queries");
  std::vector<float> out(queries, queries + nq * dim_);
  if (!center_.empty() && options_.metric == Metric::kL2)
    for (size_t q = 0; q < nq; ++q)
      for (size_t j = 0; j < dim_; ++j) out[q * dim_ + j] -= center_[j];
  if (options_.metric == Metric::kCosine)
    for (size_t q = 0; q < nq; ++q) {
      float* row = out.data() + q * dim_;
      const float norm = std::sqrt(simd::sum_of_squares(row, dim_));
      require(norm > 0.0f && std::isfinite(norm), "search: query {} has no direction (zero or huge norm)", q);
      for (size_t j = 0; j < dim_; ++j) row[j] /= norm;
    }
  return out;
}

// Ranking by ||q - x||^2 = ||q||^2 + ||x||^2 - 2 <q, x> for l2: similarity <q, x> - ||x||^2 / 2.
void FlatIndex::half_squares(size_t first, size_t count, float* out) const {
  for (size_t i = 0; i < count; ++i) {
    const float norm = half_to_float(norms_[first + i]);
    out[i] = 0.5f * norm * norm;
  }
}

void FlatIndex::scan_rows(const PreparedQuery* const* queries, size_t heads, size_t first_chunk, size_t end_chunk,
                          std::vector<TopK>& tops) const {
  const bool l2 = options_.metric == Metric::kL2;
  std::vector<float> scores(heads * kChunkRows), halves(kChunkRows);
  for (size_t chunk = first_chunk; chunk < end_chunk; ++chunk) {
    const size_t first = chunk * kChunkRows, count = std::min(kChunkRows, size() - first);
    codec_base(*codec_).scores_multi(queries, heads, codes_, first, count, scores.data(), kChunkRows);
    if (l2) half_squares(first, count, halves.data());
    for (size_t h = 0; h < heads; ++h) {
      float* row_scores = scores.data() + h * kChunkRows;
      if (l2)
        for (size_t i = 0; i < count; ++i) row_scores[i] -= halves[i];
      push_scores(tops[h], row_scores, first, count);
    }
  }
}

void FlatIndex::scan_fast(const float* queries, size_t heads, size_t first_chunk, size_t end_chunk,
                          std::vector<TopK>& tops) const {
  constexpr size_t kBlocks = kChunkRows / simd::kFastScanBlockRows;
  std::vector<FastScanStore::Tables> tables(heads);
  for (size_t h = 0; h < heads; ++h) tables[h] = fast_->tables(queries + h * dim_);
  // The integer scan keeps a wider shortlist; the float tables then give the codec's own scores.
  const size_t keep = tops.front().capacity(), shortlist = std::min(size(), 2 * keep + 32);
  std::vector<TopK> approximate(heads, TopK(shortlist));
  const bool l2 = options_.metric == Metric::kL2;
  std::vector<uint32_t> sums(kChunkRows);
  std::vector<float> scores(kChunkRows), halves(kChunkRows);
  // Chunks outside, queries inside: a chunk of codes is read from memory once for all of them.
  for (size_t chunk = first_chunk; chunk < end_chunk; ++chunk) {
    const size_t first = chunk * kChunkRows, count = std::min(kChunkRows, size() - first);
    const size_t blocks = (count + simd::kFastScanBlockRows - 1) / simd::kFastScanBlockRows;
    if (l2) half_squares(first, count, halves.data());  // once per chunk for all queries
    for (size_t h = 0; h < heads; ++h) {
      fast_->approximate(tables[h], chunk * kBlocks, blocks, sums.data(), scores.data());
      if (l2)
        for (size_t i = 0; i < count; ++i) scores[i] -= halves[i];
      push_scores(approximate[h], scores.data(), first, count);
    }
  }
  for (size_t h = 0; h < heads; ++h)
    for (const ScoredRow& candidate : approximate[h].take_sorted()) {
      float score = fast_->exact(tables[h], candidate.row), half = 0.0f;
      if (l2) half_squares(candidate.row, 1, &half);
      tops[h].push({score - half, candidate.row});
    }
}

void FlatIndex::code_candidates(const float* queries, size_t nq, size_t keep, std::vector<float>& similarity,
                                std::vector<uint32_t>& positions) const {
  const size_t n = size();
  std::vector<std::unique_ptr<PreparedQuery>> prepared(fast_ ? 0 : nq);
  std::vector<const PreparedQuery*> pointers(prepared.size());
  for (size_t q = 0; q < prepared.size(); ++q) {
    prepared[q] = codec_->prepare(queries + q * dim_);
    pointers[q] = prepared[q].get();
  }
  const size_t group_size = fast_ ? kFastScanQueryGroup : kQueryGroup;
  const size_t groups = (nq + group_size - 1) / group_size;
  const size_t chunks = (n + kChunkRows - 1) / kChunkRows;
  const int threads = options_.threads > 0 ? options_.threads : omp_get_max_threads();
  // Few queries: split the rows among threads too. Ranges are whole chunks, so every row is scored
  // in the same place of the same kernel call whatever the split: the same bits for any threads.
  size_t ranges = 1;
  if (groups < static_cast<size_t>(threads))
    ranges = std::clamp<size_t>((threads + groups - 1) / groups, 1, std::max<size_t>(1, n / kMinRangeRows));
  ranges = std::min(ranges, chunks);
  std::vector<std::vector<ScoredRow>> partial(groups * ranges * group_size);
  const long tasks = static_cast<long>(groups * ranges);
#pragma omp parallel for schedule(dynamic, 1) num_threads(team_size(threads, tasks)) if (tasks > 1)
  for (long task = 0; task < tasks; ++task) {
    const size_t group = static_cast<size_t>(task) / ranges, range = static_cast<size_t>(task) % ranges;
    const size_t first_query = group * group_size, heads = std::min(group_size, nq - first_query);
    const size_t first_chunk = range * chunks / ranges, end_chunk = (range + 1) * chunks / ranges;
    std::vector<TopK> tops(heads, TopK(keep));
    if (fast_)
      scan_fast(queries + first_query * dim_, heads, first_chunk, end_chunk, tops);
    else
      scan_rows(pointers.data() + first_query, heads, first_chunk, end_chunk, tops);
    for (size_t h = 0; h < heads; ++h) partial[(group * ranges + range) * group_size + h] = tops[h].take_sorted();
  }
  similarity.assign(nq * keep, 0.0f);
  positions.assign(nq * keep, 0);
  for (size_t q = 0; q < nq; ++q) {
    const size_t group = q / group_size, h = q % group_size;
    TopK merged(keep);
    for (size_t range = 0; range < ranges; ++range)
      for (const ScoredRow& row : partial[(group * ranges + range) * group_size + h]) merged.push(row);
    const std::vector<ScoredRow> best = merged.take_sorted();
    for (size_t r = 0; r < keep; ++r) {
      similarity[q * keep + r] = best[r].score;
      positions[q * keep + r] = best[r].row;
    }
  }
}

float FlatIndex::exact_similarity(const float* q, size_t position) const {
  float ip = 0.0f, square = 0.0f;
  if (!copy32_.empty()) {
    const float* x = copy32_.data() + position * dim_;
    ip = simd::dot(q, x, dim_);
    square = simd::dot(x, x, dim_);
  } else {
    const uint16_t* x = copy16_.data() + position * dim_;
    for (size_t j = 0; j < dim_; ++j) {
      const float value = half_to_float(x[j]);
      ip += q[j] * value;
      square += value * value;
    }
  }
  return options_.metric == Metric::kL2 ? ip - 0.5f * square : ip;
}

Neighbors FlatIndex::search(const float* queries, size_t nq, size_t k) const {
  require(size() > 0, "search: the index is empty");
  require(k >= 1 && k <= size(), "search: k must be in 1..{} (the index size), got {}", size(), k);
  require(queries != nullptr || nq == 0, "search: queries is null but nq is {}", nq);
  if (nq == 0) return Neighbors{0, k, {}, {}};  // an empty batch: nothing to score
  const std::vector<float> q = prepared_queries(queries, nq);
  const bool rerank = options_.rerank_candidates > 0;
  const size_t keep = rerank ? std::clamp(options_.rerank_candidates, k, size()) : k;
  std::vector<float> similarity;
  std::vector<uint32_t> positions;
  code_candidates(q.data(), nq, keep, similarity, positions);
  Neighbors out;
  out.queries = nq;
  out.k = k;
  out.ids.resize(nq * k);
  out.scores.resize(nq * k);
  for (size_t i = 0; i < nq; ++i) {
    const float* query = q.data() + i * dim_;
    std::vector<ScoredRow> best(keep);
    for (size_t r = 0; r < keep; ++r) best[r] = {similarity[i * keep + r], positions[i * keep + r]};
    if (rerank) {
      for (ScoredRow& row : best) row.score = exact_similarity(query, row.row);
      std::sort(best.begin(), best.end(), better);
    }
    const float query_square = options_.metric == Metric::kL2 ? simd::dot(query, query, dim_) : 0.0f;
    // ip and cosine rank by <q, x - mean>; the reported score adds back <q, mean>.
    const float shift =
        !center_.empty() && options_.metric != Metric::kL2 ? simd::dot(query, center_.data(), dim_) : 0.0f;
    for (size_t r = 0; r < k; ++r) {
      out.ids[i * k + r] = ids_[best[r].row];
      out.scores[i * k + r] =
          options_.metric == Metric::kL2 ? query_square - 2.0f * best[r].score : best[r].score + shift;
    }
  }
  return out;
}

}  // namespace kvsketch
