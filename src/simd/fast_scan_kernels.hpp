// The fast-scan kernel of the index (FAISS's "LUT16", Andre et al.; Wu et al. 2019): 4-bit codes in
// blocks of 32 rows, 16-entry byte tables held in SIMD registers and looked up 16 or more at a
// time (PSHUFB), sums in integers. Exact integer arithmetic: every instruction set gives the same
// sums as the scalar reference.
//
// Block layout: `groups` (a multiple of kFastScanGroupPad) x 16 bytes; byte j of group g holds
// nibble g of row j (low half) and of row 16 + j (high half). Tables: groups x 16 bytes.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvsketch::simd {

constexpr size_t kFastScanBlockRows = 32;
constexpr size_t kFastScanGroupPad = 4;  // 64 bytes: a whole vector step for every target

// sums[b * 32 + j] = sum_g tables[g * 16 + nibble g of row j of block b], for blocks [0, blocks).
void fast_scan_sums(const uint8_t* codes, size_t groups, size_t blocks, const uint8_t* tables, uint32_t* sums);

// Lays out one block from 32 rows of packed 4-bit codes (code_bytes each): byte k of rows j and
// 16 + j gives byte j of groups 2k (low nibbles) and 2k + 1 (high nibbles).
void fast_scan_pack_block(const uint8_t* const* rows, size_t code_bytes, uint8_t* block);

namespace reference {
void fast_scan_pack_block(const uint8_t* const* rows, size_t code_bytes, uint8_t* block);
void fast_scan_sums(const uint8_t* codes, size_t groups, size_t blocks, const uint8_t* tables, uint32_t* sums);
}

}  // namespace kvsketch::simd
