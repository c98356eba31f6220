// What an IvfIndex holds (internal).
#pragma once
#include <memory>
#include <vector>

#include "ann/fast_scan_store.hpp"
#include "ann/list_array.hpp"
#include "ann/refine_store.hpp"
#include "io/mapped_file.hpp"
#include "kvsketch/codec.hpp"
#include "kvsketch/ivf_index.hpp"

namespace kvsketch {

struct IvfList {
  CodeBuffer codes;                     // the codec's row layout, unless fast holds the codes
  std::unique_ptr<FastScanStore> fast;  // the fast-scan layout
  ListArray<int64_t> ids;
  ListArray<uint16_t> norms;  // metric l2: fp16 ||x|| per row
  RefineStore refine;

  IvfList(const VectorCodec& codec, bool fast_scan, bool log_norms, Refine refine_kind);
  size_t rows() const { return ids.size(); }
  void append_codes(const CodeBuffer& encoded);  // rows as the codec writes them
  // Bytes of a row as the list stores it: the codec's row layout, its norm in one byte with
  // log-coded norms.
  size_t stored_row_bytes() const { return fast ? fast->row_bytes() : codes.code_bytes(); }
  size_t code_bytes_held() const;
  // Keeps the rows whose flag is set, in order.
  void keep(const std::vector<bool>& kept);
};

struct IvfIndex::State {
  size_t dim;
  IvfIndexOptions options;
  std::unique_ptr<VectorCodec> codec;
  bool fast_scan = false;  // the lists use the fast-scan layout
  std::vector<float> centroids;  // nlist x dim once trained
  std::vector<float> centroid_squares;
  std::vector<IvfList> lists;
  int64_t next_id = 0;  // one past the largest id ever added
  std::shared_ptr<MappedFile> mapping;  // the file whose pages the lists' arrays view (IvfIndex::map)
  size_t rows = 0;

  State(size_t dim_, IvfIndexOptions options_);
  bool trained() const { return !centroids.empty(); }
  // What the codec encodes for a (prepared) row in a list: its residual to the list's centroid, or
  // the row itself (residual=0). dim floats into out.
  void codec_input(const float* row, size_t list, float* out) const;
  // With norm=log8, after training on the sample: each list's norm scale.
  void set_norm_scales(const float* sample, size_t n);
  // Rows as stored: normalized for cosine, into `storage`; other metrics store x as it is, and get
  // x back without a copy (a copy of a large batch costs more than its k-means step).
  const float* prepared_rows(const float* x, size_t n, std::vector<float>& storage) const;
  // Candidates kept per query by the code scan, and by the codec's estimate before refinement.
  size_t kept_by_codes(size_t k) const;
  size_t kept_by_scan(size_t k) const;
};

}  // namespace kvsketch
