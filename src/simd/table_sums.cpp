#include "simd/table_sums.hpp"

namespace kvsketch::simd {

void byte_table_sums(const float* tables, size_t table_count, const uint8_t* codes, size_t stride, size_t n,
                     float* out) {
  // Four independent partial sums hide the add latency; the order is fixed, so results are
  // reproducible. Two rows at a time give the core more independent loads.
  size_t i = 0;
  for (; i + 2 <= n; i += 2) {
    const uint8_t* a = codes + i * stride;
    const uint8_t* b = a + stride;
    float a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
    size_t p = 0;
    for (; p + 4 <= table_count; p += 4) {
      const float* t = tables + p * 256;
      a0 += t[a[p]];
      b0 += t[b[p]];
      a1 += t[256 + a[p + 1]];
      b1 += t[256 + b[p + 1]];
      a2 += t[512 + a[p + 2]];
      b2 += t[512 + b[p + 2]];
      a3 += t[768 + a[p + 3]];
      b3 += t[768 + b[p + 3]];
    }
    for (; p < table_count; ++p) {
      a0 += tables[p * 256 + a[p]];
      b0 += tables[p * 256 + b[p]];
    }
    out[i] = (a0 + a1) + (a2 + a3);
    out[i + 1] = (b0 + b1) + (b2 + b3);
  }
  for (; i < n; ++i) {
    const uint8_t* a = codes + i * stride;
    float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    size_t p = 0;
    for (; p + 4 <= table_count; p += 4) {
      const float* t = tables + p * 256;
      a0 += t[a[p]];
      a1 += t[256 + a[p + 1]];
      a2 += t[512 + a[p + 2]];
      a3 += t[768 + a[p + 3]];
    }
    for (; p < table_count; ++p) a0 += tables[p * 256 + a[p]];
    out[i] = (a0 + a1) + (a2 + a3);
  }
}

void build_value_byte_tables(const float* query, size_t dim, const float* centroids, int bits, float* tables) {
  const size_t per_byte = 8 / static_cast<size_t>(bits);
  const size_t table_count = (dim * bits + 7) / 8;
  const unsigned mask = (1u << bits) - 1u;
  for (size_t p = 0; p < table_count; ++p) {
    float* table = tables + p * 256;
    float coordinate[8];
    for (size_t f = 0; f < per_byte; ++f) {
      const size_t j = p * per_byte + f;
      coordinate[f] = j < dim ? query[j] : 0.0f;
    }
    for (unsigned v = 0; v < 256; ++v) {
      float sum = 0.0f;
      for (size_t f = 0; f < per_byte; ++f) sum += coordinate[f] * centroids[(v >> (f * bits)) & mask];
      table[v] = sum;
    }
  }
}

void build_sign_byte_tables(const float* u, size_t m, float* tables) {
  const size_t table_count = (m + 7) / 8;
  for (size_t p = 0; p < table_count; ++p) {
    float coordinate[8];
    float negative_sum = 0.0f;
    for (size_t i = 0; i < 8; ++i) {
      coordinate[i] = 8 * p + i < m ? u[8 * p + i] : 0.0f;
      negative_sum -= coordinate[i];
    }
    float* table = tables + p * 256;
    table[0] = negative_sum;
    // Setting bit i turns -u_i into +u_i: add 2 u_i to the entry without that bit.
    for (unsigned v = 1; v < 256; ++v) {
      const unsigned lowest = static_cast<unsigned>(__builtin_ctz(v));
      table[v] = table[v & (v - 1)] + 2.0f * coordinate[lowest];
    }
  }
}

}  // namespace kvsketch::simd
