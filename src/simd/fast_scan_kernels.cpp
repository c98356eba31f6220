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
#else
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
