// IvfIndex: sub-linear search over compressed vectors. A coarse quantizer (k-means, seeded and
// deterministic) splits the vectors into `nlist` inverted lists; each list holds the codes of its
// vectors (of their residuals to the list's centroid, by default) with their ids. A query scores
// the centroids, scans the `nprobe` best lists with one prepared query, and keeps the k best.
//
// Lists of TurboQuant_mse codes at 1, 2 or 4 bits lie in the fast-scan layout: one set of byte
// tables per query serves every probed list, and the best candidates of that integer scan are
// re-scored with the codec's float tables. With a refine store (fp16 or int8 copies of the
// vectors), the best k_factor * k by code are re-scored exactly, as FAISS's IndexRefine does.
//
//   auto index = kvsketch::IvfIndex(128, kvsketch::IvfIndexOptions::parse(
//       "ivf:nlist=1024,nprobe=32|tq_mse:b=4,rescale=1"));
//   index.train(sample, n_sample);        // k-means on (a seeded subsample of) the sample
//   index.add(x, n);                      // ids 0, 1, ... unless given
//   kvsketch::Neighbors found = index.search(queries, nq, 10);
//
// Scores: inner product (ip), cosine (vectors normalized first) or l2 (ranked by -||q - x||^2;
// the returned score is 2<q, x~> - ||x||^2, i.e. -||q - x~||^2 + ||q||^2). With residuals,
// <q, x~> = <q, c> + <q, r~>: the one prepared query serves every list.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvsketch/ann.hpp"
#include "kvsketch/codec.hpp"

// The library is built with hidden visibility: what this header declares is its exported API.
#pragma GCC visibility push(default)
namespace kvsketch {

// Copies of the vectors kept to re-rank a shortlist: none, fp16, or int8 with a float scale each.
enum class Refine { kNone, kFp16, kInt8 };

// How the lists hold each vector's norm (or rescale factor): as the codec writes it (fp16 or fp32),
// or in one byte on a logarithmic scale per list (log8; fast-scan lists only): around the median
// norm of the training vectors the list received, 16 to 128 steps per octave, the finest that
// holds those norms within half its range (64 steps, 0.54% at most off, when they lie within a
// factor of 2 of the median). Norms beyond the range are clamped to its ends.
enum class ListNorm { kCodec, kLog8 };

struct IvfIndexOptions {
  size_t nlist = 256;
  size_t nprobe = 16;                       // lists scanned per query (1..nlist)
  std::string codec = "tq_mse:b=4,rescale=1";  // a data-oblivious codec spec
  Metric metric = Metric::kInnerProduct;
  bool residual = true;     // encode x - centroid (false: x itself)
  uint64_t seed = 0;
  size_t iterations = 10;   // of k-means
  size_t max_train = 0;     // k-means on at most this many vectors (a seeded subsample); 0: 64 * nlist
  int threads = 0;          // 0: all (OpenMP default)
  bool fast_scan = true;    // the fast-scan layout where the codec has one
  Refine refine = Refine::kNone;
  size_t k_factor = 4;      // with a refine store: the codes keep k_factor * k for it to re-rank
  ListNorm norm = ListNorm::kCodec;

  // "ivf:nlist=N,nprobe=P,metric=ip|cosine|l2,residual=0|1,iterations=I,max_train=T,seed=S,fast_scan=0|1,
  // refine=none|fp16|int8,k_factor=F,norm=codec|log8|CODEC": fields optional, the codec after the
  // first '|'.
  // Errors name the field.
  static IvfIndexOptions parse(const std::string& factory);
  // The canonical factory string (parse(factory()) gives the same options).
  std::string factory() const;
};

// One shard's part of a search (IvfIndex::candidates), to be merged with the other shards' parts
// (IvfIndex::merge) into exactly what one index over all their vectors answers. Per query, up to
// `per_query` candidates in slots, each with the three scores that search ranks by in turn.
struct IvfCandidates {
  size_t queries = 0, k = 0, per_query = 0;
  std::vector<float> scan;     // the scan's score (the fast scan's integer tables, or the codec's)
  std::vector<float> code;     // the codec's own estimate
  std::vector<float> refined;  // from the refine store (the codec's estimate without one)
  std::vector<int64_t> ids;    // queries x per_query; -1 in unused slots
};

class IvfIndex {
 public:
  IvfIndex(size_t dim, IvfIndexOptions options);
  IvfIndex(IvfIndex&&) noexcept;
  IvfIndex& operator=(IvfIndex&&) noexcept;
  ~IvfIndex();

  size_t dim() const;
  size_t size() const;
  bool trained() const;
  const IvfIndexOptions& options() const;
  const VectorCodec& codec() const;
  // Vectors per list (nlist entries).
  std::vector<size_t> list_sizes() const;

  // k-means on n rows (n x dim); needs n >= nlist. Refuses NaN/Inf and a second training.
  void train(const float* x, size_t n);
  // Adds n rows; ids default to one past the largest id ever added (0 for the first). Refuses,
  // leaving the index unchanged: an untrained index, NaN/Inf, a negative or taken id (a given id is
  // checked against every stored one), l2 norms beyond fp16.
  void add(const float* x, size_t n, const int64_t* ids = nullptr);
  // The k best per query (nq x dim) over the nprobe lists nearest each query (nprobe 0: the
  // options'). Refuses an empty index, k = 0, k > size(), nprobe > nlist, NaN/Inf queries. The
  // same bits on any thread count. A query whose probed lists hold fewer than k vectors gets id -1
  // (score -inf) in the places left.
  Neighbors search(const float* queries, size_t nq, size_t k, size_t nprobe = 0) const;
  // Removes the rows with these ids (a pass over the lists); returns how many were present.
  size_t remove(const int64_t* ids, size_t n);
  // The first of these ids that is stored (a pass over the lists), or -1 when none is.
  int64_t first_present(const int64_t* ids, size_t n) const;

  // The parts of search, for an index sharded over processes (kvsketch/mpi_ivf_index.hpp): every
  // shard is a copy of one trained index that added its own vectors; each gives its candidates,
  // and merge, on any copy, ranks them as search over all the vectors would. search(q, nq, k, p)
  // is merge({candidates(q, nq, k, p)}). candidates refuses k = 0 but not k > size().
  IvfCandidates candidates(const float* queries, size_t nq, size_t k, size_t nprobe = 0) const;
  Neighbors merge(const std::vector<IvfCandidates>& parts) const;

  // Everything held: codes (norms and scales inside, and the fast-scan blocks' padding), ids (8
  // bytes each), l2 norms (2 bytes each, metric l2), the refine store, the centroids (nlist x dim
  // floats), their squared norms (nlist floats) and, with norm=log8, the lists' norm scales (8
  // bytes each).
  size_t bytes() const;
  size_t bytes_per_vector() const;  // codes + id (+ norm) (+ refine copy)
  // Of bytes(), those used in place in a mapped file's pages (0 unless made by map).
  size_t mapped_bytes() const;

  // Versioned file with a CRC-32; load refuses truncated, corrupted or inconsistent files. The
  // bytes form is the same file image, for sending an index to other processes.
  void save(const std::string& path) const;
  static IvfIndex load(const std::string& path);
  // The same file mapped read-only instead of read: the lists' codes, ids, norms and refine copies
  // are used where they lie in the file's pages (shared by every process that maps the file, paged
  // in as searches touch them; codes in the row layout are copied). A list copies its arrays into
  // memory the first time it changes (add, remove). The checksum and the contents are checked as
  // by load, which reads the file once. The file must not change while mapped.
  static IvfIndex map(const std::string& path);
  std::vector<uint8_t> to_bytes() const;
  static IvfIndex from_bytes(const std::vector<uint8_t>& bytes, const std::string& what = "IVF index bytes");

 private:
  friend class IvfIndexFile;
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kvsketch
#pragma GCC visibility pop
