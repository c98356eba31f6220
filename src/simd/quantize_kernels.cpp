// Highway implementations of the quantization kernels of kernels.hpp (codes from floats: scalar
// quantizer indices, sign bits, the residual's table terms, and the fused encode of 4-bit codes),
// compiled once per instruction set and chosen at run time. Element-wise operations and
// fixed-order sums only: the same indices and bits on every target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/simd/quantize_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>

#include "kvsketch/bitpack.hpp"
#include "simd/fixed_order_sums-inl.h"
#include "simd/kernels.hpp"
#include "simd/quantizer_grid.hpp"

HWY_BEFORE_NAMESPACE();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Writes the int32 lanes (each < 256) as bytes.
template <class DI, class V>
HWY_INLINE void StoreIndices(DI di, V index, uint8_t* out, int32_t* scratch) {
#if HWY_TARGET == HWY_SCALAR
  hn::Store(index, di, scratch);
  out[0] = static_cast<uint8_t>(scratch[0]);
#else
  (void)di;
  (void)scratch;
  const hn::Rebind<uint8_t, DI> du8;
  hn::StoreU(hn::DemoteTo(du8, index), du8, out);
#endif
}

// Branch-free binary search with the (at most 15) boundaries held in one or two registers:
// thresholds[j] = boundaries[j - 1], so "v > thresholds[candidate]" admits the candidate index.
// Each step depends on the previous one, so four vectors are searched at once to hide latency.
template <int kBits, class D, class DI>
HWY_INLINE size_t QuantizeInRegisters(D d, DI di, const float* values, size_t n, const float* boundaries,
                                      uint8_t* indices) {
  constexpr int kCount = (1 << kBits) - 1;
  constexpr int kBatch = 4;
  const size_t lanes = hn::Lanes(d);
  HWY_ALIGN float thresholds[32];
  for (int j = 0; j < 32; ++j)
    thresholds[j] = j == 0 ? -HUGE_VALF : (j - 1 < kCount ? boundaries[j - 1] : HUGE_VALF);
  const auto low = hn::Load(d, thresholds);
  const auto high = hn::Load(d, thresholds + lanes);
  const auto lane_mask = hn::Set(di, static_cast<int32_t>(lanes - 1));
  const bool one_register = static_cast<size_t>(kCount) < lanes;
  HWY_ALIGN int32_t lane_indices[64];
  size_t i = 0;
  for (; i + kBatch * lanes <= n; i += kBatch * lanes) {
    hn::Vec<D> v[kBatch];
    hn::Vec<DI> index[kBatch];
    hn::Mask<D> upper[kBatch];
    for (int b = 0; b < kBatch; ++b) {
      v[b] = hn::LoadU(d, values + i + b * lanes);
      index[b] = hn::Zero(di);
      if (!one_register) {  // the first step decides which register holds the rest of the search
        upper[b] = hn::Gt(v[b], hn::Set(d, thresholds[lanes]));
        index[b] = hn::IfThenElseZero(hn::RebindMask(di, upper[b]), hn::Set(di, static_cast<int32_t>(lanes)));
      }
    }
    const int first_step = one_register ? 1 << (kBits - 1) : static_cast<int>(lanes / 2);
    for (int step = first_step; step >= 1; step >>= 1) {
      for (int b = 0; b < kBatch; ++b) {
        const auto candidate = hn::Or(index[b], hn::Set(di, step));
        const auto in_register = hn::IndicesFromVec(d, hn::And(candidate, lane_mask));
        auto threshold = hn::TableLookupLanes(low, in_register);
        if (!one_register) threshold = hn::IfThenElse(upper[b], hn::TableLookupLanes(high, in_register), threshold);
        index[b] = hn::IfThenElse(hn::RebindMask(di, hn::Gt(v[b], threshold)), candidate, index[b]);
      }
    }
    for (int b = 0; b < kBatch; ++b) StoreIndices(di, index[b], indices + i + b * lanes, lane_indices);
  }
  return i;
}

// quantizer_grid.hpp: the cell by the same float operations as quantizer_grid_cell, then the
// cell's base index plus its boundaries below v (kPerCell table look-ups and comparisons).
template <int kPerCell, class D>
struct GridIndexer {
  using DI = hn::RebindToSigned<D>;
  hn::Vec<D> low, inverse_step, last;
  hn::Vec<DI> base;
  hn::Vec<D> thresholds[kPerCell];

  GridIndexer(D d, const QuantizerGrid& grid)
      : low(hn::Set(d, grid.low)),
        inverse_step(hn::Set(d, grid.inverse_step)),
        last(hn::Set(d, static_cast<float>(QuantizerGrid::kCells - 1))),
        base(hn::Load(DI(), grid.base)) {
    for (int m = 0; m < kPerCell; ++m) thresholds[m] = hn::Load(d, grid.thresholds[m]);
  }

  HWY_INLINE hn::Vec<DI> Index(D d, hn::Vec<D> v) const {
    const DI di;
    const auto x = hn::Min(hn::Max(hn::Mul(hn::Sub(v, low), inverse_step), hn::Zero(d)), last);
#if HWY_TARGET == HWY_AVX2
    // x is in [0, 7]: the plain truncating conversion, without ConvertTo's overflow fix-up.
    const hn::Vec<DI> whole{_mm256_cvttps_epi32(x.raw)};
#else
    const auto whole = hn::ConvertTo(di, x);  // truncation, as the scalar cast
#endif
    const auto cell = hn::IndicesFromVec(d, whole);
    auto index = hn::TableLookupLanes(base, hn::IndicesFromVec(di, whole));
    for (int m = 0; m < kPerCell; ++m) {
      // The mask is all-ones (-1) where v is above the boundary: subtracting it counts.
      const auto above = hn::VecFromMask(d, hn::Gt(v, hn::TableLookupLanes(thresholds[m], cell)));
      index = hn::Sub(index, hn::BitCast(di, above));
    }
    return index;
  }
};

template <int kPerCell>
void QuantizeGridLoop(const float* values, size_t n, const QuantizerGrid& grid, uint8_t* indices) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const size_t lanes = hn::Lanes(d);
  const GridIndexer<kPerCell, decltype(d)> indexer(d, grid);
  HWY_ALIGN int32_t lane_indices[64];
  size_t i = 0;
  for (; i + lanes <= n; i += lanes)
    StoreIndices(di, indexer.Index(d, hn::LoadU(d, values + i)), indices + i, lane_indices);
  for (; i < n; ++i) {
    const int c = quantizer_grid_cell(values[i], grid.low, grid.inverse_step);
    int index = grid.base[c];
    for (int m = 0; m < kPerCell; ++m) index += values[i] > grid.thresholds[m][c];
    indices[i] = static_cast<uint8_t>(index);
  }
}

void QuantizeImpl(const float* values, size_t n, const float* boundaries, int bits, uint8_t* indices,
                  const QuantizerGrid* grid) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const size_t lanes = hn::Lanes(d);
  // The grid only where vectors have as many lanes as it has cells (AVX2's 8): with 16 lanes the
  // boundary search needs one look-up per step and the grid four per vector, so the search wins
  // there (docs/RESULTS.md has the timings).
  if (grid != nullptr && grid->usable && lanes == QuantizerGrid::kCells) {
    switch (grid->per_cell) {
      case 1: return QuantizeGridLoop<1>(values, n, *grid, indices);
      case 2: return QuantizeGridLoop<2>(values, n, *grid, indices);
      default: return QuantizeGridLoop<3>(values, n, *grid, indices);
    }
  }
  const int count = (1 << bits) - 1;
  HWY_ALIGN int32_t lane_indices[64];
  size_t i = 0;
  if (bits <= 4 && lanes >= 8 && lanes <= 16) {
    switch (bits) {
      case 1: i = QuantizeInRegisters<1>(d, di, values, n, boundaries, indices); break;
      case 2: i = QuantizeInRegisters<2>(d, di, values, n, boundaries, indices); break;
      case 3: i = QuantizeInRegisters<3>(d, di, values, n, boundaries, indices); break;
      default: i = QuantizeInRegisters<4>(d, di, values, n, boundaries, indices); break;
    }
  }
  if (bits <= 4) {
    for (; i + lanes <= n; i += lanes) {
      const auto v = hn::LoadU(d, values + i);
      auto index = hn::Zero(di);
      for (int k = 0; k < count; ++k) {
        // mask is all-ones (-1) where v > boundary: subtracting it counts.
        const auto above = hn::VecFromMask(d, hn::Gt(v, hn::Set(d, boundaries[k])));
        index = hn::Sub(index, hn::BitCast(di, above));
      }
      StoreIndices(di, index, indices + i, lane_indices);
    }
  } else {
    // Branch-free binary search: index = #boundaries below v.
    for (; i + lanes <= n; i += lanes) {
      const auto v = hn::LoadU(d, values + i);
      auto index = hn::Zero(di);
      for (int step = 1 << (bits - 1); step >= 1; step >>= 1) {
        const auto candidate = hn::Add(index, hn::Set(di, step));
        const auto threshold = hn::GatherIndex(d, boundaries, hn::Sub(candidate, hn::Set(di, 1)));
        index = hn::IfThenElse(hn::RebindMask(di, hn::Gt(v, threshold)), candidate, index);
      }
      StoreIndices(di, index, indices + i, lane_indices);
    }
  }
  for (; i < n; ++i) {
    int index = 0;
    for (int k = 0; k < count; ++k) index += values[i] > boundaries[k];
    indices[i] = static_cast<uint8_t>(index);
  }
}

void SignBitsImpl(const float* x, size_t n, uint8_t* packed) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  if (lanes >= 8) {
    const auto zero = hn::Zero(d);
    for (; i + lanes <= n; i += lanes) hn::StoreMaskBits(d, hn::Gt(hn::LoadU(d, x + i), zero), packed + i / 8);
  }
  for (size_t p = i / 8; p < (n + 7) / 8; ++p) packed[p] = 0;
  for (; i < n; ++i) packed[i / 8] |= static_cast<uint8_t>((x[i] > 0.0f) << (i % 8));
}

// Tables of up to one vector of floats are looked up in a register.
void SubtractTableImpl(const float* values, const uint8_t* indices, size_t n, const float* table, size_t table_size,
                       float* out) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const hn::Rebind<uint8_t, decltype(d)> du8;
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  if (lanes >= 8 && lanes <= 16 && table_size <= lanes) {
    HWY_ALIGN float padded[16] = {};
    std::copy(table, table + table_size, padded);
    const auto entries = hn::Load(d, padded);
    for (; i + lanes <= n; i += lanes) {
      const auto index = hn::PromoteTo(di, hn::LoadU(du8, indices + i));
      const auto centroid = hn::TableLookupLanes(entries, hn::IndicesFromVec(d, index));
      hn::StoreU(hn::Sub(hn::LoadU(d, values + i), centroid), d, out + i);
    }
  }
  reference::subtract_table(values + i, indices + i, n - i, table, table_size, out + i);
}

// One vector's terms of codeword_dot: each index's entry of a table of up to two registers (low,
// high), then v^2 and v (v - entry) added to the vector's partial sums.
template <class D, class VI>
HWY_INLINE void AddCodewordTerms(D d, hn::Vec<D> v, VI index, hn::Vec<D> low, hn::Vec<D> high, bool two_registers,
                                 VI lane_mask, hn::Vec<D>& square_sum, hn::Vec<D>& product_sum) {
  const auto in_register = hn::IndicesFromVec(d, hn::And(index, lane_mask));
  auto centroid = hn::TableLookupLanes(low, in_register);
  if (two_registers)
    centroid = hn::IfThenElse(hn::RebindMask(d, hn::Gt(index, lane_mask)), hn::TableLookupLanes(high, in_register),
                              centroid);
  square_sum = hn::Add(square_sum, hn::Mul(v, v));
  product_sum = hn::Add(product_sum, hn::Mul(v, hn::Sub(v, centroid)));
}

// codeword_dot's terms of values[first, n) (indices[j - first] for value j) added to the partial
// sums in the scalar definition's order, then the fixed tree.
float CodewordDotTail(const float* values, const uint8_t* indices, size_t first, size_t n, const float* table,
                      float* squares, float* products) {
  constexpr size_t kPartials = reference::kFixedOrderPartials;
  for (size_t j = first; j < n; ++j) {
    const float residual = values[j] - table[indices[j - first]];
    squares[j % kPartials] += values[j] * values[j];
    products[j % kPartials] += values[j] * residual;
  }
  return reference::reduce_partials(squares) - reference::reduce_partials(products);
}

// sum_of_squares(values) - fixed_order_dot(values, values - table[indices]), the residual never
// stored: the same products and partial sums in the same order, so the same bits.
float CodewordDotImpl(const float* values, const uint8_t* indices, size_t n, const float* table, size_t table_size) {
  constexpr size_t kPartials = reference::kFixedOrderPartials;
  const hn::ScalableTag<float> d;
  constexpr size_t kLanes = hn::MaxLanes(d);
  HWY_ALIGN float squares[kPartials] = {}, products[kPartials] = {};
  size_t i = 0;
  if constexpr (kLanes >= 8 && kLanes <= 16 && kPartials % kLanes == 0) {
    const hn::RebindToSigned<decltype(d)> di;
    const hn::Rebind<uint8_t, decltype(d)> du8;
    if (hn::Lanes(d) == kLanes && table_size <= 2 * kLanes) {
      constexpr size_t kVectors = kPartials / kLanes;
      HWY_ALIGN float padded[2 * kLanes] = {};
      std::copy(table, table + table_size, padded);
      const auto low = hn::Load(d, padded), high = hn::Load(d, padded + kLanes);
      const bool two_registers = table_size > kLanes;
      const auto lane_mask = hn::Set(di, static_cast<int32_t>(kLanes - 1));
      hn::Vec<decltype(d)> square_sums[kVectors], product_sums[kVectors];
      for (size_t k = 0; k < kVectors; ++k) square_sums[k] = product_sums[k] = hn::Zero(d);
      for (; i + kPartials <= n; i += kPartials)
        for (size_t k = 0; k < kVectors; ++k) {
          const auto index = hn::PromoteTo(di, hn::LoadU(du8, indices + i + k * kLanes));
          AddCodewordTerms(d, hn::LoadU(d, values + i + k * kLanes), index, low, high, two_registers, lane_mask,
                           square_sums[k], product_sums[k]);
        }
      if (i == n) return ReduceAccumulators(d, square_sums) - ReduceAccumulators(d, product_sums);
      for (size_t k = 0; k < kVectors; ++k) {
        hn::Store(square_sums[k], d, squares + k * kLanes);
        hn::Store(product_sums[k], d, products + k * kLanes);
      }
    }
  }
  return CodewordDotTail(values, indices + i, i, n, table, squares, products);
}

#if HWY_TARGET == HWY_AVX2
// Sixteen 4-bit indices (int32 lanes) as pack_bits writes them: byte k = i[2k] | i[2k + 1] << 4.
// Mostly in-lane operations: the grid's look-ups already keep the cross-lane shuffle port busy.
HWY_INLINE void StoreNibblePairs(__m256i first, __m256i second, uint8_t* out) {
  // Each u64 lane (i[2k], i[2k + 1]) shifted right by 28 puts i[2k + 1] << 4 beside i[2k]: the
  // byte of pair k sits at dword 2k of first (pairs 0-3) and of second (pairs 4-7).
  first = _mm256_or_si256(first, _mm256_srli_epi64(first, 28));
  second = _mm256_or_si256(second, _mm256_srli_epi64(second, 28));
  const __m256i both = _mm256_or_si256(first, _mm256_slli_epi32(second, 8));  // dword 2k: pairs k, k + 4
  // Per 128-bit lane: the two bytes of dwords 0 and 2 to bytes 0-3 (low lane: pairs 0, 1, 4, 5).
  const __m256i gather = _mm256_setr_epi8(0, 8, 1, 9, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,  //
                                          0, 8, 1, 9, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m256i picked = _mm256_shuffle_epi8(both, gather);
  // Words: low (0, 1), high (2, 3), low (4, 5), high (6, 7).
  const __m128i bytes = _mm_unpacklo_epi16(_mm256_castsi256_si128(picked), _mm256_extracti128_si256(picked, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), bytes);
}

// quantize, pack_bits and codeword_dot in one pass (4-bit codes, the 8-lane grid): the same
// indices, bytes and bits as the three kernels, without storing the indices and reading them back.
template <int kPerCell>
float QuantizePackDotGrid(const float* values, size_t n, const float* boundaries, const QuantizerGrid& grid,
                          const float* table, uint8_t* packed, uint8_t* scratch) {
  constexpr size_t kPartials = reference::kFixedOrderPartials;
  const hn::Full256<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  constexpr size_t kLanes = 8, kVectors = kPartials / kLanes;
  const GridIndexer<kPerCell, decltype(d)> indexer(d, grid);
  const auto low = hn::LoadU(d, table), high = hn::LoadU(d, table + kLanes);
  const auto lane_mask = hn::Set(di, static_cast<int32_t>(kLanes - 1));
  hn::Vec<decltype(d)> square_sums[kVectors], product_sums[kVectors];
  for (size_t k = 0; k < kVectors; ++k) square_sums[k] = product_sums[k] = hn::Zero(d);
  size_t i = 0;
  for (; i + kPartials <= n; i += kPartials)
    for (size_t k = 0; k < kVectors; k += 2) {
      hn::Vec<decltype(di)> index[2];
      for (size_t h = 0; h < 2; ++h) {
        const auto v = hn::LoadU(d, values + i + (k + h) * kLanes);
        index[h] = indexer.Index(d, v);
        AddCodewordTerms(d, v, index[h], low, high, true, lane_mask, square_sums[k + h], product_sums[k + h]);
      }
      StoreNibblePairs(index[0].raw, index[1].raw, packed + (i + k * kLanes) / 2);
    }
  if (i == n) return ReduceAccumulators(d, square_sums) - ReduceAccumulators(d, product_sums);
  // The rest as the separate kernels do it, continuing the same partial sums.
  HWY_ALIGN float squares[kPartials], products[kPartials];
  for (size_t k = 0; k < kVectors; ++k) {
    hn::Store(square_sums[k], d, squares + k * kLanes);
    hn::Store(product_sums[k], d, products + k * kLanes);
  }
  reference::quantize(values + i, n - i, boundaries, 4, scratch);
  pack_bits(scratch, n - i, 4, packed + i / 2);
  return CodewordDotTail(values, scratch, i, n, table, squares, products);
}
#endif

float QuantizePackDotImpl(const float* values, size_t n, const float* boundaries, int bits, const QuantizerGrid* grid,
                          const float* table, size_t table_size, uint8_t* packed, uint8_t* scratch) {
#if HWY_TARGET == HWY_AVX2
  if (bits == 4 && table_size == 16 && grid != nullptr && grid->usable) {
    switch (grid->per_cell) {
      case 1: return QuantizePackDotGrid<1>(values, n, boundaries, *grid, table, packed, scratch);
      case 2: return QuantizePackDotGrid<2>(values, n, boundaries, *grid, table, packed, scratch);
      default: return QuantizePackDotGrid<3>(values, n, boundaries, *grid, table, packed, scratch);
    }
  }
#endif
  QuantizeImpl(values, n, boundaries, bits, scratch, grid);
  pack_bits(scratch, n, bits, packed);
  return CodewordDotImpl(values, scratch, n, table, table_size);
}
}  // namespace HWY_NAMESPACE
}  // namespace kvsketch::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvsketch::simd {

HWY_EXPORT(QuantizeImpl);
HWY_EXPORT(SignBitsImpl);
HWY_EXPORT(SubtractTableImpl);
HWY_EXPORT(CodewordDotImpl);
HWY_EXPORT(QuantizePackDotImpl);

void quantize(const float* values, size_t n, const float* boundaries, int bits, uint8_t* indices,
              const QuantizerGrid* grid) {
  HWY_DYNAMIC_DISPATCH(QuantizeImpl)(values, n, boundaries, bits, indices, grid);
}
void sign_bits(const float* x, size_t n, uint8_t* packed) { HWY_DYNAMIC_DISPATCH(SignBitsImpl)(x, n, packed); }
void subtract_table(const float* values, const uint8_t* indices, size_t n, const float* table, size_t table_size,
                    float* out) {
  HWY_DYNAMIC_DISPATCH(SubtractTableImpl)(values, indices, n, table, table_size, out);
}
float codeword_dot(const float* values, const uint8_t* indices, size_t n, const float* table, size_t table_size) {
  return HWY_DYNAMIC_DISPATCH(CodewordDotImpl)(values, indices, n, table, table_size);
}
float quantize_pack_dot(const float* values, size_t n, const float* boundaries, int bits, const QuantizerGrid* grid,
                        const float* table, size_t table_size, uint8_t* packed, uint8_t* scratch) {
  return HWY_DYNAMIC_DISPATCH(QuantizePackDotImpl)(values, n, boundaries, bits, grid, table, table_size, packed,
                                                    scratch);
}
}  // namespace kvsketch::simd
#endif
