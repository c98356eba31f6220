// IvfIndex search: per query, the centroids pick the lists; a scan of their codes keeps a shortlist
// (the fast scan's integer tables, or the codec's scores), the codec's float estimate keeps the
// best of it, and the refine store, if any, re-ranks those. Every stage ranks by (score, then lower
// id), so that merging the candidates of shards gives exactly the answer of one index.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ann/ivf_state.hpp"
#include "ann/kmeans.hpp"
#include "ann/top_k.hpp"
#include "core/require.hpp"
#include "core/thread_scope.hpp"
#include "kvsketch/half.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {
namespace {

constexpr size_t kScanBlocks = 8;  // fast-scan blocks (32 rows each) scored per kernel call
constexpr float kWorst = -std::numeric_limits<float>::infinity();

struct Candidate {
  float scan, code, refined;
  int64_t id;
};

// A NaN score (an overflowing l2 estimate) ranks last rather than breaking the ordering.
float rankable(float score) { return std::isnan(score) ? kWorst : score; }

template <float Candidate::*Score>
bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.*Score > b.*Score || (a.*Score == b.*Score && a.id < b.id);
}

// Keeps the best `count` of candidates by Score, best first.
template <float Candidate::*Score>
void keep_best(std::vector<Candidate>& candidates, size_t count) {
  count = std::min(count, candidates.size());
  std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(count), candidates.end(),
                    ranks_before<Score>);
  candidates.resize(count);
}

// A row met by the scan: where it lies (the query's probe-th list), to be scored further if it
// stays among the best.
struct ScanHit {
  float scan;
  int64_t id;
  uint32_t probe, row;
};

bool hit_before(const ScanHit& a, const ScanHit& b) { return a.scan > b.scan || (a.scan == b.scan && a.id < b.id); }

// The best `capacity` hits seen; the heap's front is the worst kept.
class HitHeap {
 public:
  explicit HitHeap(size_t capacity) : capacity_(capacity) { heap_.reserve(capacity); }
  void push(const ScanHit& hit) {
    if (heap_.size() < capacity_) {
      heap_.push_back(hit);
      std::push_heap(heap_.begin(), heap_.end(), hit_before);
    } else if (hit_before(hit, heap_.front())) {
      std::pop_heap(heap_.begin(), heap_.end(), hit_before);
      heap_.back() = hit;
      std::push_heap(heap_.begin(), heap_.end(), hit_before);
    }
  }
  // Scores below this cannot enter.
  float threshold() const { return heap_.size() < capacity_ ? kWorst : heap_.front().scan; }
  std::vector<ScanHit>& hits() { return heap_; }

 private:
  size_t capacity_;
  std::vector<ScanHit> heap_;
};

}  // namespace

IvfCandidates IvfIndex::candidates(const float* queries, size_t nq, size_t k, size_t nprobe) const {
  const State& s = *state_;
  require(s.trained(), "IvfIndex: search before train");
  require(k >= 1, "IvfIndex: search: k must be >= 1");
  require(nq == 0 || queries != nullptr, "IvfIndex: search: queries is null");
  require_finite(queries, nq, s.dim, "IvfIndex search queries");
  require(nprobe <= s.options.nlist, "IvfIndex: search: nprobe must be in 1..nlist = {} (0: the options'), got {}",
          s.options.nlist, nprobe);
  const size_t probes = nprobe ? nprobe : s.options.nprobe;
  std::vector<float> normalized;
  const float* prepared_queries = s.prepared_rows(queries, nq, normalized);
  IvfCandidates out;
  out.queries = nq;
  out.k = k;
  out.per_query = s.kept_by_scan(k);
  out.scan.assign(nq * out.per_query, kWorst);
  out.code.assign(nq * out.per_query, kWorst);
  out.refined.assign(nq * out.per_query, kWorst);
  out.ids.assign(nq * out.per_query, -1);
  const ThreadScope threads(s.options.threads);
  const bool l2 = s.options.metric == Metric::kL2;
  const FastScanStore* tables_of = s.fast_scan ? s.lists.front().fast.get() : nullptr;
  // The lists to scan: the best centroids by the metric's similarity, with <q, c> of each.
  std::vector<uint32_t> probe_lists(nq * probes);
  std::vector<float> probe_dots(nq * probes);
  nearest_centroids(prepared_queries, nq, s.dim, s.centroids, l2 ? &s.centroid_squares : nullptr, probes,
                    probe_lists.data(), probe_dots.data());
#pragma omp parallel
  {
    std::vector<float> scores, scratch(s.dim);
    std::vector<uint32_t> sums(kScanBlocks * simd::kFastScanBlockRows);
#pragma omp for schedule(dynamic, 1)
    for (size_t qi = 0; qi < nq; ++qi) {
      const float* q = prepared_queries + qi * s.dim;
      const uint32_t* query_lists = probe_lists.data() + qi * probes;
      const float* centroid_dot = probe_dots.data() + qi * probes;
      // ip: <q, x~>; l2: 2 <q, x~> - ||x||^2, which ranks as -||q - x~||^2.
      const auto similarity = [&](const IvfList& list, size_t row, float dot) {
        if (!l2) return dot;
        const float norm = half_to_float(list.norms[row]);
        return 2.0f * dot - norm * norm;
      };
      FastScanStore::Tables tables;
      std::unique_ptr<PreparedQuery> prepared;
      if (tables_of)
        tables = tables_of->tables(q);
      else
        prepared = s.codec->prepare(q);
      HitHeap heap(out.per_query);
      for (uint32_t probe = 0; probe < probes; ++probe) {
        const IvfList& list = s.lists[query_lists[probe]];
        const size_t rows = list.rows();
        const float offset = s.options.residual ? centroid_dot[probe] : 0.0f;
        const size_t step = tables_of ? kScanBlocks * simd::kFastScanBlockRows : rows;
        for (size_t first = 0; first < rows; first += step) {
          const size_t count = std::min(step, rows - first);
          scores.resize(tables_of ? step : count);
          if (tables_of)
            list.fast->approximate(tables, first / simd::kFastScanBlockRows,
                                   (count + simd::kFastScanBlockRows - 1) / simd::kFastScanBlockRows, sums.data(),
                                   scores.data());
          else
            s.codec->scores(*prepared, list.codes, first, count, scores.data());
          float threshold = heap.threshold();
          for (size_t i = 0; i < count; ++i) {
            const float score = rankable(similarity(list, first + i, offset + scores[i]));
            if (score < threshold) continue;
            heap.push({score, list.ids[first + i], probe, static_cast<uint32_t>(first + i)});
            threshold = heap.threshold();
          }
        }
      }
      // The hits in the slots of this query, each with its codec estimate and refined score.
      std::vector<ScanHit>& hits = heap.hits();
      std::sort(hits.begin(), hits.end(), hit_before);
      for (size_t slot = 0; slot < hits.size(); ++slot) {
        const ScanHit& hit = hits[slot];
        const IvfList& list = s.lists[query_lists[hit.probe]];
        const float offset = s.options.residual ? centroid_dot[hit.probe] : 0.0f;
        float code = hit.scan;
        if (tables_of) code = rankable(similarity(list, hit.row, offset + list.fast->exact(tables, hit.row)));
        float refined = code;
        if (list.refine.kind() != Refine::kNone) {
          float dot = 0.0f, square = 0.0f;
          list.refine.similarity_terms(q, hit.row, scratch.data(), dot, square);
          refined = rankable(l2 ? 2.0f * dot - square : dot);
        }
        const size_t at = qi * out.per_query + slot;
        out.scan[at] = hit.scan;
        out.code[at] = code;
        out.refined[at] = refined;
        out.ids[at] = hit.id;
      }
    }
  }
  return out;
}

Neighbors IvfIndex::merge(const std::vector<IvfCandidates>& parts) const {
  const State& s = *state_;
  require(!parts.empty(), "IvfIndex: merge: no parts");
  const size_t nq = parts.front().queries, k = parts.front().k;
  for (const IvfCandidates& part : parts) {
    require(part.queries == nq && part.k == k, "IvfIndex: merge: parts of different searches ({} and {} queries)", nq,
            part.queries);
    require(part.per_query == s.kept_by_scan(k) && part.ids.size() == nq * part.per_query &&
                part.scan.size() == part.ids.size() && part.code.size() == part.ids.size() &&
                part.refined.size() == part.ids.size(),
            "IvfIndex: merge: a part's arrays do not match its shape (another index's options?)");
  }
  Neighbors out;
  out.queries = nq;
  out.k = k;
  out.ids.assign(nq * k, -1);
  out.scores.assign(nq * k, kWorst);
  std::vector<Candidate> candidates;
  for (size_t qi = 0; qi < nq; ++qi) {
    candidates.clear();
    for (const IvfCandidates& part : parts)
      for (size_t slot = 0; slot < part.per_query; ++slot) {
        const size_t at = qi * part.per_query + slot;
        if (part.ids[at] >= 0) candidates.push_back({part.scan[at], part.code[at], part.refined[at], part.ids[at]});
      }
    // The same three cuts that one index makes over its own rows.
    keep_best<&Candidate::scan>(candidates, s.kept_by_scan(k));
    keep_best<&Candidate::code>(candidates, s.kept_by_codes(k));
    keep_best<&Candidate::refined>(candidates, k);
    for (size_t r = 0; r < candidates.size(); ++r) {
      out.ids[qi * k + r] = candidates[r].id;
      out.scores[qi * k + r] = candidates[r].refined;
    }
  }
  return out;
}

Neighbors IvfIndex::search(const float* queries, size_t nq, size_t k, size_t nprobe) const {
  require(trained(), "IvfIndex: search before train");
  require(size() > 0, "IvfIndex: search: the index is empty");
  require(k <= size(), "IvfIndex: search: k must be in 1..size() = {}, got {}", size(), k);
  return merge({candidates(queries, nq, k, nprobe)});
}

}  // namespace kvsketch
