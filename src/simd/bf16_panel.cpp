#include "simd/bf16_panel.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/require.hpp"
#include "simd/amx.hpp"

#if defined(__x86_64__) && !defined(KVSKETCH_PORTABLE)
#define KVSKETCH_BF16_PANEL_AMX 1
#include <immintrin.h>
#endif

namespace kvsketch::simd {

uint16_t to_bf16(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  // To nearest, ties to even (overflow rounds to infinity); a NaN stays a (quiet) NaN. Branch-free,
  // so that loops of it vectorize.
  const uint32_t rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16;
  const uint32_t quiet_nan = (bits >> 16) | 0x40;
  return static_cast<uint16_t>((bits & 0x7FFFFFFF) > 0x7F800000 ? quiet_nan : rounded);
}

float from_bf16(uint16_t value) {
  const uint32_t bits = static_cast<uint32_t>(value) << 16;
  float out = 0.0f;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

namespace {

constexpr size_t kStrip = 16;  // columns of a B tile (float sums of a C tile row)
constexpr size_t kDepth = 32;  // bf16 values along a tile row: 64 bytes
constexpr size_t kPairs = kDepth / 2;

// Rounds n floats to bf16 into out, zeros up to `padded`.
void convert_row(const float* in, size_t n, size_t padded, uint16_t* out) {
  for (size_t k = 0; k < n; ++k) out[k] = to_bf16(in[k]);
  std::fill(out + n, out + padded, uint16_t{0});
}

}  // namespace

void pack_bf16_panel(const float* b, size_t nb, size_t n, uint16_t* packed) {
  const size_t depth = bf16_panel_depth(n), blocks = depth / kDepth;
  std::vector<uint16_t> row(depth);
  std::fill(packed, packed + bf16_panel_columns(nb) * depth, uint16_t{0});
  for (size_t j = 0; j < nb; ++j) {
    convert_row(b + j * n, n, depth, row.data());
    const size_t strip = j / kStrip, column = j % kStrip;
    for (size_t block = 0; block < blocks; ++block) {
      uint16_t* tile = packed + (strip * blocks + block) * kStrip * kDepth;
      for (size_t pair = 0; pair < kPairs; ++pair)
        for (size_t p = 0; p < 2; ++p) tile[pair * kDepth + column * 2 + p] = row[block * kDepth + 2 * pair + p];
    }
  }
}

double bf16_panel_relative_error(size_t n) {
  const double unit = std::ldexp(1.0, -8);  // bf16 rounding to nearest: 8 significant bits
  const double dn = static_cast<double>(n), float_unit = std::ldexp(1.0, -24);
  const double gamma = dn * float_unit / (1.0 - dn * float_unit);
  return 2.0 * unit + unit * unit + gamma * (1.0 + unit) * (1.0 + unit);
}

double bf16_panel_absolute_error(size_t n) {
  // Inputs, products and sums below 2^-126 may be taken as zero: at most 2^-126 per input
  // (weighted by the other side's magnitude, sqrt(n) ||.|| in all) and per sum (n of them).
  // Four times that, with room.
  const double dn = static_cast<double>(n);
  return std::ldexp(1.0, -124) * (std::sqrt(dn) + dn);
}

#if KVSKETCH_BF16_PANEL_AMX
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512bf16"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("amx-tile,amx-bf16,avx512f,avx512bw,avx512bf16")
#endif

namespace {

// convert_row with AVX512-BF16 (every CPU with AMX-BF16 has it): 32 values per instruction, to
// nearest even as to_bf16, except that values below float's normal range become zero, which the
// bound allows for.
void convert_row_avx512(const float* in, size_t n, size_t padded, uint16_t* out) {
  size_t k = 0;
  for (; k + 32 <= n; k += 32) {
    const __m512bh pair = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(in + k + 16), _mm512_loadu_ps(in + k));
    _mm512_storeu_si512(out + k, reinterpret_cast<const __m512i&>(pair));
  }
  if (k < n) {
    const size_t left = n - k;
    const __mmask16 low = static_cast<__mmask16>(left >= 16 ? 0xFFFF : (1u << left) - 1);
    const __mmask16 high = static_cast<__mmask16>(left <= 16 ? 0 : (1u << (left - 16)) - 1);
    const __m512bh pair = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(high, in + k + 16), _mm512_maskz_loadu_ps(low, in + k));
    _mm512_storeu_si512(out + k, reinterpret_cast<const __m512i&>(pair));  // zeros past n: padded >= k + 32
    k += 32;
  }
  std::fill(out + k, out + padded, uint16_t{0});
}

// Tiles 0-3: sums (rows 0-15 or 16-31 by strip s or s + 1); 4, 5: the two row tiles of A; 6, 7: the
// two strips of B. Tile numbers are immediates.
void run_tiles(const uint16_t* a16, size_t first_rows, size_t second_rows, size_t depth, const uint16_t* packed,
               size_t columns, float* out, size_t out_stride) {
  TileConfig config;
  for (int t : {0, 1}) config.Set(t, first_rows, kStrip * sizeof(float));
  config.Set(4, first_rows, kDepth * sizeof(uint16_t));
  if (second_rows > 0) {
    for (int t : {2, 3}) config.Set(t, second_rows, kStrip * sizeof(float));
    config.Set(5, second_rows, kDepth * sizeof(uint16_t));
  }
  for (int t : {6, 7}) config.Set(t, kPairs, kStrip * 2 * sizeof(uint16_t));
  _tile_loadconfig(&config);
  const size_t blocks = depth / kDepth, strips = columns / kStrip;
  const size_t a_stride = depth * sizeof(uint16_t), b_stride = kStrip * 2 * sizeof(uint16_t);
  const size_t c_stride = out_stride * sizeof(float);
  const size_t tile_values = kStrip * kDepth;
  for (size_t s = 0; s < strips; s += 2) {
    const bool pair = s + 1 < strips;
    const uint16_t* b0 = packed + s * blocks * tile_values;
    const uint16_t* b1 = b0 + blocks * tile_values;
    _tile_zero(0);  // tiles 2 and 3 exist only with a second row tile: touching them otherwise faults
    _tile_zero(1);
    if (second_rows > 0) {
      _tile_zero(2);
      _tile_zero(3);
    }
    for (size_t block = 0; block < blocks; ++block) {
      _tile_loadd(4, a16 + block * kDepth, a_stride);
      _tile_loadd(6, b0 + block * tile_values, b_stride);
      _tile_dpbf16ps(0, 4, 6);
      if (pair) {
        _tile_loadd(7, b1 + block * tile_values, b_stride);
        _tile_dpbf16ps(1, 4, 7);
      }
      if (second_rows > 0) {
        _tile_loadd(5, a16 + kStrip * depth + block * kDepth, a_stride);
        _tile_dpbf16ps(2, 5, 6);
        if (pair) _tile_dpbf16ps(3, 5, 7);
      }
    }
    float* c = out + s * kStrip;
    _tile_stored(0, c, c_stride);
    if (pair) _tile_stored(1, c + kStrip, c_stride);
    if (second_rows > 0) {
      _tile_stored(2, c + kStrip * out_stride, c_stride);
      if (pair) _tile_stored(3, c + kStrip * out_stride + kStrip, c_stride);
    }
  }
  _tile_release();
}

}  // namespace

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // KVSKETCH_BF16_PANEL_AMX

void bf16_dot_panel(const float* a, size_t na, const uint16_t* packed, size_t columns, size_t n, float* out,
                    size_t out_stride) {
  require(na <= kBf16PanelRows && columns % kStrip == 0 && out_stride >= columns,
          "bf16_dot_panel: at most 32 rows, whole strips of 16 columns, an output row per stride");
  require(amx_bf16_usable(), "bf16_dot_panel: this machine has no usable AMX-BF16 unit");
  if (na == 0 || columns == 0) return;
#if KVSKETCH_BF16_PANEL_AMX
  const size_t depth = bf16_panel_depth(n);
  thread_local std::vector<uint16_t> rows;  // the rows as bf16, 32 rows of `depth`
  if (rows.size() < kBf16PanelRows * depth) rows.resize(kBf16PanelRows * depth);
  for (size_t i = 0; i < na; ++i) convert_row_avx512(a + i * n, n, depth, rows.data() + i * depth);
  const size_t first_rows = std::min(na, kStrip), second_rows = na - first_rows;
  run_tiles(rows.data(), first_rows, second_rows, depth, packed, columns, out, out_stride);
#else
  (void)a, (void)packed, (void)out;
#endif
}

}  // namespace kvsketch::simd
