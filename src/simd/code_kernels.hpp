// Kernels that turn packed codes back into floats, a block of rows at a time, for the multi-query
// attention path (decode once, then every query head of a GQA group reads the floats). Exact:
// every target gives the same floats.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvsketch::simd {

// indices[j] = b-bit index j of `packed` (the layout of bitpack.hpp), j < count; b = 1..8.
void unpack_indices(const uint8_t* packed, size_t count, int bits, uint8_t* indices);

// out[j] = table[indices[j]] for j < count (any table size; up to 16 entries stay in registers).
void lookup_floats(const uint8_t* indices, size_t count, const float* table, size_t table_size, float* out);

// Rows of b-bit indices (row i at codes + i * stride, bitpack layout, d indices) to
// out[i * out_stride + j] = table[index j of row i]; the fast path covers b <= 4.
void decode_index_rows(const uint8_t* codes, size_t stride, size_t n, size_t d, int bits, const float* table,
                       size_t table_size, float* out, size_t out_stride);

// out[j] = bit j of `packed` ? plus : -plus (LSB-first), j < count.
void signs_to_floats(const uint8_t* packed, size_t count, float plus, float* out);

// out[j] = (int8) codes[j] as float, j < count.
void int8_to_floats(const uint8_t* codes, size_t count, float* out);

}  // namespace kvsketch::simd
