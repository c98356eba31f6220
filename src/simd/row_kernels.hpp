// The two kernels of decode attention, over rows of any stored format: scores of several query
// heads against every row, and the weighted sum of rows for several heads. A row is decoded in
// registers a vector at a time and used by every head before the next (one pass over memory for
// a whole GQA group; no decoded copy of the history). Query-time only: sums may differ between
// instruction sets in the last bits.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvsketch::simd {

enum class RowFormat {
  kFloat,  // dim floats
  kHalf,   // dim fp16 values
  kInt8,   // dim signed bytes
  kUint8,  // dim unsigned bytes (8-bit levels: q8_0's)
  kIndex,  // dim b-bit indices (bitpack.hpp layout, b = 1..8) into `table`
  kSign,   // dim sign bits, LSB-first: +1 or -1
};

struct RowSource {
  RowFormat format = RowFormat::kFloat;
  const uint8_t* data = nullptr;  // row i starts at data + i * stride
  size_t stride = 0;              // bytes from one row to the next
  size_t dim = 0;                 // values per row
  int bits = 0;                   // kIndex
  const float* table = nullptr;   // kIndex: 2^bits values
  // Bytes that may be read from the start of each row (0: stride). Wide loads past them read the
  // last row from a padded copy; a part of a wider row (ChannelSplit) gives its own bytes.
  size_t readable = 0;
  // Optional (row_scores and row_weighted_sum): row i is stored row indices[i], a gather of
  // scattered rows (the tokens a selector picked); the kernels fetch rows ahead of use.
  const uint32_t* indices = nullptr;
  // kIndex, the fused attention kernel only (int_index_attention): the rows come in quads, groups
  // of four stored interleaved (simd/quad_rows.hpp): quad g at data + 4 * g * stride.
  bool quads = false;

  const uint8_t* row(size_t i) const { return data + (indices ? indices[i] : i) * stride; }
};

// out[h * out_stride + i] = scale * <queries[h], row i> for h < heads, i < n (queries: heads x dim).
void row_scores(const RowSource& rows, size_t n, const float* queries, size_t heads, float scale, float* out,
                size_t out_stride);

// acc[h * acc_stride + j] += sum_i weights[h * weight_stride + i] * row i [j] for h < heads, j < dim.
void row_weighted_sum(const RowSource& rows, size_t n, const float* weights, size_t heads, size_t weight_stride,
                      float* acc, size_t acc_stride);

}  // namespace kvsketch::simd
