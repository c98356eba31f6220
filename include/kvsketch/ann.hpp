// FlatIndex: exhaustive nearest-neighbour search over the codes of any codec, with no training.
// Every stored vector is one code row (its norms and scales inside), its id, and for the L2 metric
// its fp16 norm; search scores each row straight from the codes with the query rotated once.
//
//   kvsketch::FlatIndex index(128, "tq_pca:b=4", kvsketch::Metric::kL2);
//   index.add(base, n);                               // ids 0..n-1 (or pass ids)
//   kvsketch::Neighbors hits = index.search(queries, nq, 10);
//   hits.id(q, 0);                                    // best match of query q
//
// Scores: inner product and cosine return the estimated similarity (larger is better); L2 returns
// the estimated squared distance (smaller is better). Results are ordered best first, ties by
// lower id, and are the same bits for any thread count.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kvsketch/codec.hpp"

// The library is built with hidden visibility: what this header declares is its exported API.
#pragma GCC visibility push(default)
namespace kvsketch {

enum class Metric { kInnerProduct, kCosine, kL2 };
// "ip", "cosine", "l2" (also "inner_product", "angular", "euclidean"); anything else throws Error.
Metric parse_metric(const std::string& name);
std::string metric_name(Metric metric);

struct Neighbors {
  size_t queries = 0, k = 0;
  std::vector<int64_t> ids;   // queries x k
  std::vector<float> scores;  // queries x k
  int64_t id(size_t query, size_t rank) const { return ids[query * k + rank]; }
  float score(size_t query, size_t rank) const { return scores[query * k + rank]; }
};

// Exact re-ranking: the best `candidates` rows by code score are re-scored against stored copies
// of the vectors (fp16 or fp32, counted in bytes_per_vector()).
enum class RerankStore { kNone, kFp16, kFp32 };

struct FlatIndexOptions {
  std::string codec = "tq_pca:b=4";
  Metric metric = Metric::kInnerProduct;
  uint64_t seed = 0;
  RerankStore rerank_store = RerankStore::kNone;
  size_t rerank_candidates = 0;  // per query; 0 = no re-ranking (needs a store when > 0)
  int threads = 0;               // 0 = all (OpenMP default)
  // TurboQuant_mse at 1, 2 or 4 bits (and tq_pca while it uses no basis): scan 4-bit groups with
  // byte tables in SIMD registers, then re-score the best candidates with float tables (same
  // results, up to table rounding among the candidates kept). Ignored for other codecs.
  bool fast_scan = true;
  // Quantize x - mean, the mean of the first vectors added (up to 4096 of the first batch; of unit
  // vectors for cosine): rankings are
  // unchanged (l2 centres the query too; ip and cosine add <q, mean> back), and the codes' error
  // scales with ||x - mean|| instead of ||x||. Kept as d floats, counted in calibration_bytes().
  bool center = true;
};

class FastScanStore;
class TopK;

class FlatIndex {
 public:
  FlatIndex(size_t dim, const FlatIndexOptions& options);
  FlatIndex(size_t dim, const std::string& codec, Metric metric, uint64_t seed = 0)
      : FlatIndex(dim, FlatIndexOptions{codec, metric, seed}) {}
  FlatIndex(FlatIndex&&) noexcept;
  ~FlatIndex();
  // Whether search uses the fast-scan layout.
  bool fast_scan() const { return fast_ != nullptr; }

  size_t dim() const { return dim_; }
  size_t size() const { return ids_.size(); }
  const FlatIndexOptions& options() const { return options_; }
  const VectorCodec& codec() const { return *codec_; }

  // Adds n rows (row-major n x dim). The centre (options.center) and a data-dependent codec
  // (center:SPEC) come from the first rows of the first batch: give it a representative one. ids
  // default to one past the largest id added (0, 1, ... at first; after a load, past the largest
  // stored), so they never collide with a stored one; an id already present,
  // a duplicate within ids, a negative id, NaN/Inf, or (cosine) a zero vector is refused naming
  // the row, and the index is unchanged.
  void add(const float* x, size_t n, const int64_t* ids = nullptr);
  // k best rows per query (row-major nq x dim). Refuses k = 0, k > size(), NaN/Inf queries.
  Neighbors search(const float* queries, size_t nq, size_t k) const;
  // Removes the rows with these ids; returns how many were present. Unknown ids are ignored.
  size_t remove(const int64_t* ids, size_t n);
  bool contains(int64_t id) const { return position_.count(id) != 0; }

  // Everything stored per vector: code row (norms, scales inside), id (8), L2 norm (2), copy for
  // re-ranking. bytes() = size() * bytes_per_vector(); code_bytes_per_vector() is the codec's part.
  size_t bytes_per_vector() const;
  size_t code_bytes_per_vector() const;
  // Plus the index's l2 centre (d floats) and the codec's calibration (center: keeps an fp16
  // mean), held once per index.
  size_t calibration_bytes() const;
  size_t bytes() const { return size() * bytes_per_vector() + calibration_bytes(); }

  // Versioned file with a CRC-32; load refuses truncated, corrupted or inconsistent files.
  void save(const std::string& path) const;
  static FlatIndex load(const std::string& path);

 private:
  // Per query, the best `keep` rows by code score, as (similarity, position) best first.
  void scan_rows(const PreparedQuery* const* queries, size_t heads, size_t first_chunk, size_t end_chunk,
                 std::vector<TopK>& tops) const;
  void scan_fast(const float* queries, size_t heads, size_t first_chunk, size_t end_chunk,
                 std::vector<TopK>& tops) const;
  // ||x||^2 / 2 of rows [first, first + count) from the stored l2 norms.
  void half_squares(size_t first, size_t count, float* out) const;
  void code_candidates(const float* queries, size_t nq, size_t keep, std::vector<float>& similarity,
                       std::vector<uint32_t>& positions) const;
  // The similarity of stored row `position` to q: code estimate, or the stored copy when exact.
  float exact_similarity(const float* q, size_t position) const;
  std::vector<float> prepared_queries(const float* queries, size_t nq) const;
  // The fast-scan layout if requested and the codec (as calibrated) has one; only while empty.
  void choose_layout();
  // Rows [first, first + count) of x as stored: unit vectors for cosine, minus the centre.
  void prepare_rows(const float* x, size_t first, size_t count, std::vector<float>& rows,
                    std::vector<float>& squared_norms) const;

  size_t dim_;
  FlatIndexOptions options_;
  std::unique_ptr<VectorCodec> codec_;
  CodeBuffer codes_;                    // row layout, unless fast_ holds the codes
  std::unique_ptr<FastScanStore> fast_;
  std::vector<int64_t> ids_;
  std::vector<uint16_t> norms_;   // L2 only: fp16 ||x|| per row
  std::vector<uint16_t> copy16_;  // RerankStore::kFp16: rows x dim
  std::vector<float> copy32_;     // RerankStore::kFp32: rows x dim
  std::unordered_map<int64_t, size_t> position_;
  int64_t next_id_ = 0;  // one past the largest id added (recomputed from the ids on load)
  bool calibrated_ = false;  // data-dependent codecs calibrate on the first add
  bool fast_scan_requested_ = true;
  std::vector<float> center_;  // with options.center: the mean subtracted (empty until the first add)
};

}  // namespace kvsketch
#pragma GCC visibility pop
