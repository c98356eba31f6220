// Highway implementation of fast_scan_kernels.hpp, compiled per instruction set.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/simd/fast_scan_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>

#include "simd/fast_scan_kernels.hpp"

HWY_BEFORE_NAMESPACE();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET == HWY_SCALAR
// One-lane vectors cannot hold a 16-byte table: the plain loop.
void FastScanSumsImpl(const uint8_t* codes, size_t groups, size_t blocks, const uint8_t* tables, uint32_t* sums) {
  reference::fast_scan_sums(codes, groups, blocks, tables, sums);
}
void FastScanPackBlockImpl(const uint8_t* const* rows, size_t code_bytes, uint8_t* block) {
  reference::fast_scan_pack_block(rows, code_bytes, block);
}
#else
// 16 code bytes of 32 rows at a time: rows j and 16 + j merged into the low and the high nibble
// groups' bytes, then a 16 x 16 byte transpose (four rounds of interleaving vector i with i + 8)
// turns byte position c of the 16 rows into group bytes.
void FastScanPackBlockImpl(const uint8_t* const* rows, size_t code_bytes, uint8_t* block) {
  const hn::FixedTag<uint8_t, 16> d;
  const auto low_nibble = hn::Set(d, uint8_t{0x0F}), high_nibble = hn::Set(d, uint8_t{0xF0});
  size_t k = 0;
  for (; k + 16 <= code_bytes; k += 16) {
    hn::Vec<decltype(d)> low[16], high[16], next[16];
    for (size_t j = 0; j < 16; ++j) {
      const auto a = hn::LoadU(d, rows[j] + k), b = hn::LoadU(d, rows[16 + j] + k);
      low[j] = hn::Or(hn::And(a, low_nibble), hn::ShiftLeft<4>(b));
      high[j] = hn::Or(hn::ShiftRight<4>(a), hn::And(b, high_nibble));
    }
    for (auto* v : {low, high}) {
      for (int round = 0; round < 4; ++round) {
        for (size_t i = 0; i < 8; ++i) {
          next[2 * i] = hn::InterleaveLower(d, v[i], v[i + 8]);
          next[2 * i + 1] = hn::InterleaveUpper(d, v[i], v[i + 8]);
        }
        for (size_t i = 0; i < 16; ++i) v[i] = next[i];
      }
    }
    for (size_t c = 0; c < 16; ++c) {
      hn::StoreU(low[c], d, block + 2 * (k + c) * 16);
      hn::StoreU(high[c], d, block + (2 * (k + c) + 1) * 16);
    }
  }
  if (k < code_bytes) {  // the last few bytes
    const uint8_t* rest[kFastScanBlockRows];
    for (size_t j = 0; j < kFastScanBlockRows; ++j) rest[j] = rows[j] + k;
    reference::fast_scan_pack_block(rest, code_bytes - k, block + 2 * k * 16);
  }
}

void FastScanSumsImpl(const uint8_t* codes, size_t groups, size_t blocks, const uint8_t* tables, uint32_t* sums) {
  const hn::ScalableTag<uint8_t> d8;
  const hn::Repartition<uint16_t, decltype(d8)> d16;
  const size_t step = hn::Lanes(d8) / 16, half_lanes = hn::Lanes(d16);  // groups per vector
  // A u16 lane takes one byte (<= 255) per vector step: 256 steps cannot overflow it.
  const size_t flush_groups = 256 * step;
  const auto nibble = hn::Set(d8, uint8_t{0x0F});
  const auto low_byte = hn::Set(d16, uint16_t{0x00FF});
  HWY_ALIGN uint16_t parts[4][hn::MaxLanes(d16)];
  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* block = codes + b * groups * 16;
    uint32_t* out = sums + b * kFastScanBlockRows;
    std::fill(out, out + kFastScanBlockRows, 0u);
    for (size_t start = 0; start < groups; start += flush_groups) {
      const size_t end = std::min(groups, start + flush_groups);
      auto low_even = hn::Zero(d16), low_odd = hn::Zero(d16), high_even = hn::Zero(d16), high_odd = hn::Zero(d16);
      for (size_t g = start; g < end; g += step) {
        const auto packed = hn::LoadU(d8, block + g * 16);
        const auto table = hn::LoadU(d8, tables + g * 16);
        const auto low = hn::BitCast(d16, hn::TableLookupBytes(table, hn::And(packed, nibble)));
        const auto high_index = hn::And(hn::BitCast(d8, hn::ShiftRight<4>(hn::BitCast(d16, packed))), nibble);
        const auto high = hn::BitCast(d16, hn::TableLookupBytes(table, high_index));
        // u16 lane t of a 128-bit block: rows 2t (low byte) and 2t + 1 (high byte).
        low_even = hn::Add(low_even, hn::And(low, low_byte));
        low_odd = hn::Add(low_odd, hn::ShiftRight<8>(low));
        high_even = hn::Add(high_even, hn::And(high, low_byte));
        high_odd = hn::Add(high_odd, hn::ShiftRight<8>(high));
      }
      hn::Store(low_even, d16, parts[0]);
      hn::Store(low_odd, d16, parts[1]);
      hn::Store(high_even, d16, parts[2]);
      hn::Store(high_odd, d16, parts[3]);
      for (size_t i = 0; i < half_lanes; ++i) {
        const size_t t = i % 8;
        out[2 * t] += parts[0][i];
        out[2 * t + 1] += parts[1][i];
        out[16 + 2 * t] += parts[2][i];
        out[17 + 2 * t] += parts[3][i];
      }
    }
  }
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace kvsketch::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvsketch::simd {

HWY_EXPORT(FastScanSumsImpl);
HWY_EXPORT(FastScanPackBlockImpl);

void fast_scan_pack_block(const uint8_t* const* rows, size_t code_bytes, uint8_t* block) {
  HWY_DYNAMIC_DISPATCH(FastScanPackBlockImpl)(rows, code_bytes, block);
}

void reference::fast_scan_pack_block(const uint8_t* const* rows, size_t code_bytes, uint8_t* block) {
  for (size_t k = 0; k < code_bytes; ++k) {
    uint8_t* low = block + 2 * k * 16;
    uint8_t* high = low + 16;
    for (size_t j = 0; j < 16; ++j) {
      const uint8_t a = rows[j][k], b = rows[16 + j][k];
      low[j] = static_cast<uint8_t>((a & 15) | (b << 4));
      high[j] = static_cast<uint8_t>((a >> 4) | (b & 0xF0));
    }
  }
}

void fast_scan_sums(const uint8_t* codes, size_t groups, size_t blocks, const uint8_t* tables, uint32_t* sums) {
  HWY_DYNAMIC_DISPATCH(FastScanSumsImpl)(codes, groups, blocks, tables, sums);
}

void reference::fast_scan_sums(const uint8_t* codes, size_t groups, size_t blocks, const uint8_t* tables,
                               uint32_t* sums) {
  for (size_t b = 0; b < blocks; ++b)
    for (size_t row = 0; row < kFastScanBlockRows; ++row) {
      uint32_t sum = 0;
      for (size_t g = 0; g < groups; ++g) {
        const uint8_t byte = codes[(b * groups + g) * 16 + row % 16];
        sum += tables[g * 16 + (row < 16 ? byte & 15 : byte >> 4)];
      }
      sums[b * kFastScanBlockRows + row] = sum;
    }
}

}  // namespace kvsketch::simd
#endif
