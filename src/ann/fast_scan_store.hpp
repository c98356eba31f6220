// FastScanStore: the codes of a TurboQuant_mse index at 1, 2 or 4 bits, laid out for the fast-scan
// kernel (simd/fast_scan_kernels.hpp): each row's packed indices cut into 4-bit groups (one
// coordinate at 4 bits, two at 2, four at 1) and transposed into blocks of 32 rows, plus each row's
// trailing bytes (its norm or rescale factor). Same bytes per vector as the codec's rows, plus the
// zero padding of the last block; or, with log-coded norms (ann/log_norm.hpp), the norm in one byte
// on the store's scale.
//
// Scoring: per query, 16-entry float tables per group (<rotated q, centroids>), quantized to bytes
// for the integer scan; the best candidates of the scan are then re-scored with the float tables,
// which gives the codec's own estimate, so that table quantization does not cost recall.
#pragma once
#include <cstdint>
#include <vector>

#include "codec/turboquant.hpp"
#include "ann/list_array.hpp"
#include "ann/log_norm.hpp"
#include "core/default_init_allocator.hpp"
#include "simd/fast_scan_kernels.hpp"

namespace kvsketch {

class FastScanStore {
 public:
  // Whether codec has a layout this store can hold (TurboQuant_mse at 1, 2 or 4 bits, or tq_pca
  // while it is that codec).
  static bool supports(const VectorCodec& codec);
  // log_norms: keep each norm in one byte on norm_scale() (the codec's norm must be its whole tail).
  explicit FastScanStore(const VectorCodec& codec, bool log_norms = false);

  size_t rows() const { return rows_; }
  size_t bytes_per_vector() const { return groups_ * 16 / simd::kFastScanBlockRows + tail_bytes_; }
  size_t bytes() const { return blocks_.size() + tails_.size(); }
  // Bytes of a row as stored: the codec's code_bytes, or its index bytes and one byte with
  // log-coded norms.
  size_t row_bytes() const { return layout_.index_bytes + tail_bytes_; }
  const log_norm::Scale& norm_scale() const { return scale_; }
  // Before any row is appended: the scale of log-coded norms.
  void set_norm_scale(const log_norm::Scale& scale);

  void append(const CodeBuffer& encoded);  // rows as the codec writes them
  void reserve(size_t rows);
  void move_row(size_t from, size_t to);  // row `to` becomes a copy of row `from`
  void truncate(size_t rows);

  struct Tables {
    std::vector<float> exact;       // groups x 16
    std::vector<uint8_t> quantized;  // groups x 16, exact ~= step * quantized + per-group offsets
    float step = 1.0f, bias = 0.0f;  // sum of exact ~= step * sum of quantized + bias
  };
  Tables tables(const float* query) const;
  // Approximate scores of rows [first_block * 32, (first_block + blocks) * 32) into out (32 per
  // block; rows past rows() are scored too and must be ignored). sums: 32 * blocks scratch.
  void approximate(const Tables& t, size_t first_block, size_t blocks, uint32_t* sums, float* out) const;
  // The codec's estimate <q, x~> of one row, from the float tables.
  float exact(const Tables& t, size_t row) const;
  // The first row whose norm or rescale factor is NaN or Inf (no encoder writes one), or rows().
  size_t first_non_finite_row() const;

  // Raw storage, for save and load: the blocks (whole blocks of 32 rows), then each row's tail.
  ListArray<uint8_t, DefaultInitAllocator<uint8_t>>& block_bytes() { return blocks_; }
  ListArray<uint8_t, DefaultInitAllocator<uint8_t>>& tail_bytes() { return tails_; }
  const ListArray<uint8_t, DefaultInitAllocator<uint8_t>>& block_bytes() const { return blocks_; }
  const ListArray<uint8_t, DefaultInitAllocator<uint8_t>>& tail_bytes() const { return tails_; }
  size_t block_bytes_for(size_t rows) const {
    return (rows + simd::kFastScanBlockRows - 1) / simd::kFastScanBlockRows * groups_ * 16;
  }
  void set_rows(size_t rows) { rows_ = rows; }
  size_t groups() const { return groups_; }
  size_t tail_bytes_per_row() const { return tail_bytes_; }

 private:
  uint8_t nibble(size_t row, size_t group) const;
  void set_nibble(size_t row, size_t group, uint8_t value);
  float scale(size_t row) const;
  // A codec row's tail as stored: copied, or its norm log-coded.
  void store_tail(const uint8_t* row, uint8_t* out) const;

  const TurboQuant& codec_;
  TurboQuant::ScanLayout layout_;
  size_t dim_, groups_, tail_bytes_, rows_ = 0;  // tail_bytes_: as stored
  bool log_norms_ = false;
  log_norm::Scale scale_;
  // Grown without zero fill (append writes every new byte); views of a mapped file's pages until
  // the store changes.
  ListArray<uint8_t, DefaultInitAllocator<uint8_t>> blocks_, tails_;
};

}  // namespace kvsketch
