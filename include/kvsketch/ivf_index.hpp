// IvfIndex: sub-linear search over compressed vectors. A coarse quantizer (k-means, seeded and
// deterministic) splits the vectors into `nlist` inverted lists; each list holds the codes of its
// vectors (of their residuals to the list's centroid, by default) with their ids. A query scores
// the centroids, scans the `nprobe` best lists with one prepared query, and keeps the k best.
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

struct IvfIndexOptions {
  size_t nlist = 256;
  size_t nprobe = 16;                       // lists scanned per query (at most nlist)
  std::string codec = "tq_mse:b=4,rescale=1";  // a data-oblivious codec spec
  Metric metric = Metric::kInnerProduct;
  bool residual = true;     // encode x - centroid (false: x itself)
  uint64_t seed = 0;
  size_t iterations = 10;   // of k-means
  size_t max_train = 0;     // k-means on at most this many vectors (a seeded subsample); 0: 64 * nlist
  int threads = 0;          // 0: all (OpenMP default)

  // "ivf:nlist=N,nprobe=P,metric=ip|cosine|l2,residual=0|1,iterations=I,seed=S|CODEC": fields
  // optional, the codec after the first '|'. Errors name the field.
  static IvfIndexOptions parse(const std::string& factory);
  // The canonical factory string (parse(factory()) gives the same options).
  std::string factory() const;
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
  // options'; more than nlist: nlist). Refuses k = 0, k > size(), NaN/Inf queries. The same bits
  // on any thread count.
  Neighbors search(const float* queries, size_t nq, size_t k, size_t nprobe = 0) const;
  // Removes the rows with these ids (a pass over the lists); returns how many were present.
  size_t remove(const int64_t* ids, size_t n);

  // Everything held: codes (norms and scales inside), ids (8 bytes each), l2 norms (2 bytes each,
  // metric l2), the centroids (nlist x dim floats) and their squared norms (nlist floats).
  size_t bytes() const;
  size_t bytes_per_vector() const;  // codes + id (+ norm)

  // Versioned file with a CRC-32; load refuses truncated, corrupted or inconsistent files.
  void save(const std::string& path) const;
  static IvfIndex load(const std::string& path);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kvsketch
#pragma GCC visibility pop
