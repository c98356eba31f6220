// Look-up-table kernels for scoring codes without decoding them. A query is turned once into
// tables; each code is then a sum of table entries:
//   byte tables   one 256-entry table per code byte (b in {1, 2, 4, 8}: whole indices per byte;
//                 QJL sign bits: partial sums of 8 sketch coordinates)
//   index tables  one 2^b-entry table per coordinate, for widths whose indices straddle bytes
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvsketch::simd {

// out[i] = sum_{p < table_count} tables[256 p + codes[i * stride + p]]
void byte_table_sums(const float* tables, size_t table_count, const uint8_t* codes, size_t stride, size_t n,
                     float* out);
// Tables for b-bit scalar codes (b in {1, 2, 4, 8}): entry v of table p is
// sum_f query[p * (8/b) + f] * centroids[(v >> (f b)) & (2^b - 1)], query read as 0 beyond dim.
void build_value_byte_tables(const float* query, size_t dim, const float* centroids, int bits, float* tables);
// Tables for sign bits: entry v of table p is sum_{i<8} (bit i of v ? +u : -u)[8p + i], u read as 0 beyond m.
void build_sign_byte_tables(const float* u, size_t m, float* tables);

}  // namespace kvsketch::simd
