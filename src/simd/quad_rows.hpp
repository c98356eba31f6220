// Rows in quads: four rows stored interleaved, so that one load takes the same coordinates of all
// four (the AVX3_DL attention kernels read them without a byte gather across rows, a large part of
// a tq_mse:b=3 step: docs/RESULTS.md, "Kernel design measurements").
//
// In a quad, every field of a row (its b-bit codes, a norm) is cut into chunks, and chunk k of
// row r lies at 4 * offset + (4k + r) * chunk, where offset is the field's place in a plain row;
// a last, shorter chunk of `tail` bytes lies at 4 * offset + 4 * chunk * k + r * tail. The codes
// of b-bit indices are cut into chunks of b bytes (8 coordinates); a norm is one chunk. A quad is
// four rows' bytes long: the layout stores nothing more.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "simd/int_index_kernels.hpp"

namespace kvsketch::simd {

struct QuadField {
  size_t offset = 0;  // in a plain row
  size_t bytes = 0;
  size_t chunk = 0;  // 1 <= chunk <= bytes
};

// Where byte `byte` of row r's copy of `field` lies, from the start of its quad.
size_t quad_byte(const QuadField& field, size_t r, size_t byte);

// The fields an index RowSource's kernels read: its codes (chunks of `bits` bytes) and the given
// factors of 2 (fp16) or 4 bytes (float), at their offsets from the row's start.
std::vector<QuadField> index_fields(const RowSource& rows, const std::vector<const RowFactor*>& factors);

// The fields of rows of `stride` bytes, checked once (each within the row, chunks of 1..bytes), and
// the moves between plain rows and quads by whole chunks.
class QuadLayout {
 public:
  QuadLayout(size_t stride, std::vector<QuadField> fields);
  size_t stride() const { return stride_; }
  const std::vector<QuadField>& fields() const { return fields_; }
  // Whether the fields cover every byte of the row once (then the moves lose nothing).
  bool covers_rows() const;
  // Plain rows (n a multiple of 4, row i at rows + i * stride) into quads at out (n * stride bytes).
  void to_quads(const uint8_t* rows, size_t n, uint8_t* out) const;
  // Rows [0, n) of the quads at `quads` as plain rows at out: the bytes of the fields (the rest
  // untouched).
  void to_rows(const uint8_t* quads, size_t n, uint8_t* out) const;
  // Row `row` (any) of the quads at `quads` as one plain row at out.
  void row(const uint8_t* quads, size_t row, uint8_t* out) const;

 private:
  struct Move {
    uint32_t plain, in_quad, bytes;  // a chunk's place in its row and in its quad
  };
  size_t stride_;
  std::vector<QuadField> fields_;
  std::vector<Move> moves_[4];  // row r's chunks
};

// Rows [0, n) (n a multiple of 4) of quads `rows` as plain rows of the same stride and offsets:
// the bytes of `fields`, the rest zero.
std::vector<uint8_t> rows_from_quads(const RowSource& rows, size_t n, const std::vector<QuadField>& fields);
// The inverse: plain rows (row i at rows + i * stride) into quads at out (n * stride bytes).
void quads_from_rows(const uint8_t* rows, size_t stride, size_t n, const std::vector<QuadField>& fields,
                     uint8_t* out);

}  // namespace kvsketch::simd
