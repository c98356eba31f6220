// Dot products of many float rows with many float vectors on the AMX-BF16 unit, as a screen.
//
// Why: k-means and the coarse assignment of the IVF index score every row against every centroid,
// and on AVX-512 that runs at the FMA peak. One TDPBF16PS multiplies 16 x 32 by 32 x 16 bf16 values
// into float sums, 16 to 32 times the products of an FMA. The inputs are rounded to bf16 (8
// significant bits), so the results are approximate: callers take them with the bound below and
// confirm in the fixed order whatever the bound cannot decide, which gives the same bits as without
// the screen. Only where amx_bf16_usable() (src/simd/amx.hpp) says so.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvsketch::simd {

// Rows a bf16_dot_panel call takes at most (two tiles of 16).
constexpr size_t kBf16PanelRows = 32;
// Columns bf16_dot_panel computes for nb vectors: strips of 16.
constexpr size_t bf16_panel_columns(size_t nb) { return (nb + 15) / 16 * 16; }
// The vector length padded to the tiles' depth of 32 bf16.
constexpr size_t bf16_panel_depth(size_t n) { return (n + 31) / 32 * 32; }

// Packs nb vectors b_j (n floats each, row-major) as bf16 (rounded to nearest even) in the layout of
// AMX B tiles: per strip of 16 vectors and block of 32 coordinates, 16 rows of 16 (vector) x 2
// (coordinate pair) values. packed holds bf16_panel_columns(nb) * bf16_panel_depth(n) values;
// zeros past nb and n.
void pack_bf16_panel(const float* b, size_t nb, size_t n, uint16_t* packed);

// out[i * out_stride + j] = <bf16(a_i), bf16(b_j)> for i < na (<= kBf16PanelRows) and every
// j < columns (= bf16_panel_columns(nb); 0 past nb), summed in float on the AMX unit. Compared with
// the exact <a_i, b_j>, the error is within
//   bf16_panel_relative_error(n) * ||a_i|| ||b_j|| + bf16_panel_absolute_error(n) * (||a_i|| + ||b_j|| + 2)
// (bf16 rounding of both inputs, the unit's float sums in any order, and inputs and sums below
// float's normal range taken as zero). Requires amx_bf16_usable().
void bf16_dot_panel(const float* a, size_t na, const uint16_t* packed, size_t columns, size_t n, float* out,
                    size_t out_stride);

double bf16_panel_relative_error(size_t n);
double bf16_panel_absolute_error(size_t n);

// Round to nearest even, NaN kept a NaN: the conversion the packing uses (exposed for tests).
uint16_t to_bf16(float value);
float from_bf16(uint16_t value);

}  // namespace kvsketch::simd
