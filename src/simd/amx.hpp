// Intel AMX (Advanced Matrix Extensions: tile registers and a matrix-multiply unit) at run time.
//
// Why: on CPUs that have it (Sapphire Rapids and later), one TDPBUSD multiplies a 16 x 64 byte tile
// by a 64 x 16 one, 16 times the products of a 512-bit VNNI instruction, on a unit of its own. The
// integer attention kernels use it when it is there; their sums stay exact, so the results are the
// same bits as without it.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvsketch::simd {

// Whether the AMX-INT8 kernels may run: the CPU reports AMX-TILE and AMX-INT8, the OS enables tile
// state (XCR0), Linux granted this process the tile data permission (asked once, here), and neither
// KVSKETCH_AMX=0 in the environment nor set_amx_allowed(false) turned them off.
bool amx_usable();

// The same for AMX-BF16 (TDPBF16PS: a 16 x 32 by 32 x 16 bf16 product into float sums), which the
// k-means and coarse-assignment screen of src/simd/bf16_panel.hpp uses.
bool amx_bf16_usable();

// Turns the AMX kernels (INT8 and BF16) off (false) or back on where the machine has them, for tests and A/B
// measurements. Returns the previous setting. Not meant to race with running kernels.
bool set_amx_allowed(bool allowed);

// The 64-byte operand of LDTILECFG (palette 1): bytes per row and rows of each tile, for the
// kernels that configure tiles.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t row_bytes[16] = {};
  uint8_t rows[16] = {};

  void Set(int tile, size_t tile_rows, size_t bytes) {
    rows[tile] = static_cast<uint8_t>(tile_rows);
    row_bytes[tile] = static_cast<uint16_t>(bytes);
  }
};

}  // namespace kvsketch::simd
