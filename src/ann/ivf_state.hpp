// What an IvfIndex holds (internal).
#pragma once
#include <memory>
#include <vector>

#include "kvsketch/codec.hpp"
#include "kvsketch/ivf_index.hpp"

namespace kvsketch {

struct IvfList {
  CodeBuffer codes;
  std::vector<int64_t> ids;
  std::vector<uint16_t> norms;  // metric l2: fp16 ||x|| per row
};

struct IvfIndex::State {
  size_t dim;
  IvfIndexOptions options;
  std::unique_ptr<VectorCodec> codec;
  std::vector<float> centroids;  // nlist x dim once trained
  std::vector<float> centroid_squares;
  std::vector<IvfList> lists;
  int64_t next_id = 0;  // one past the largest id ever added
  size_t rows = 0;

  State(size_t dim_, IvfIndexOptions options_);
  bool trained() const { return !centroids.empty(); }
  // Rows as stored: normalized for cosine.
  std::vector<float> prepared_rows(const float* x, size_t n) const;
};

}  // namespace kvsketch
