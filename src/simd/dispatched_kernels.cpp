// Highway implementations of the kernels in kernels.hpp but the quantizers' (quantize_kernels.cpp):
// the Hadamard transform, fixed-order sums and dot products, the matrix-vector product, and the
// choice of target. Compiled once per instruction set and chosen at run time. Element-wise
// operations and fixed-order sums only on the encode path (see kernels.hpp).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/simd/dispatched_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <hwy/targets.h>

#include <algorithm>
#include <limits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/require.hpp"
#include "simd/fetch.hpp"
#include "simd/fixed_order_sums-inl.h"
#include "simd/kernels.hpp"

HWY_BEFORE_NAMESPACE();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The butterfly stages between the kVectors vectors held: vector j with j + 1, then j + 2, ...
template <class V, int kVectors>
HWY_INLINE void ButterfliesAcross(V (&v)[kVectors]) {
  for (int distance = 1; distance < kVectors; distance *= 2)
    for (int j = 0; j < kVectors; ++j)
      if ((j & distance) == 0) {
        const auto a = v[j], b = v[j + distance];
        v[j] = hn::Add(a, b);
        v[j + distance] = hn::Sub(a, b);
      }
}

// The transform runs in few sweeps over memory. The first reads the input, applies the optional
// scale and sign multiply, all butterflies whose partner lies in the same vector (lane
// permutations) and the first (up to three) stages across the 2^kStages neighbouring vectors it
// holds; each further sweep does up to three stages on eight vectors held in registers. The
// butterflies, and so the bits, are exactly those of reference::fwht; only the order of
// independent ones changes.
// kScale and kFactors are template arguments so that the loop tests neither per vector.
template <int kStages, bool kScale, bool kFactors, class D>
HWY_INLINE void FirstSweep(D d, const float* in, float scale, const float* factors, float* out, size_t n) {
  // Stage s pairs lane i with lane i ^ 2^s; the lower one adds, the upper one subtracts.
  HWY_ALIGN static constexpr int32_t partner[4][16] = {
      {1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14},
      {2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13},
      {4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11},
      {8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7}};
  HWY_ALIGN static constexpr float signs[4][16] = {
      {1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1},
      {1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1},
      {1, 1, 1, 1, -1, -1, -1, -1, 1, 1, 1, 1, -1, -1, -1, -1},
      {1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1}};
  constexpr int kVectors = 1 << kStages;
  const size_t lanes = hn::Lanes(d);
  size_t stages = 0;
  while ((size_t{2} << stages) <= lanes) ++stages;
  const auto scale_vector = hn::Set(d, scale);
  for (size_t block = 0; block < n; block += kVectors * lanes) {
    hn::Vec<D> v[kVectors];
    for (int j = 0; j < kVectors; ++j) {
      const size_t i = block + j * lanes;
      v[j] = hn::LoadU(d, in + i);
      if constexpr (kScale) v[j] = hn::Mul(v[j], scale_vector);  // x * scale, then * factor: as two steps
      if constexpr (kFactors) v[j] = hn::Mul(v[j], hn::LoadU(d, factors + i));
      for (size_t s = 0; s < stages; ++s) {
        const auto swapped = hn::TableLookupLanes(v[j], hn::SetTableIndices(d, partner[s]));
        // v * (+-1) is exact, so the fused multiply-add rounds once, exactly like a + b and a - b.
        v[j] = hn::MulAdd(v[j], hn::Load(d, signs[s]), swapped);
      }
    }
    ButterfliesAcross(v);
    for (int j = 0; j < kVectors; ++j) hn::StoreU(v[j], d, out + block + j * lanes);
  }
}

// Stages with partner distances half, 2 half, ..., 2^(kStages-1) half (half a multiple of lanes).
template <int kStages, class D>
HWY_INLINE void RegisterBlockSweep(D d, float* data, size_t n, size_t half) {
  constexpr int kVectors = 1 << kStages;
  const size_t lanes = hn::Lanes(d);
  for (size_t block = 0; block < n; block += half * kVectors) {
    for (size_t offset = block; offset < block + half; offset += lanes) {
      hn::Vec<D> v[kVectors];
      for (int j = 0; j < kVectors; ++j) v[j] = hn::LoadU(d, data + offset + j * half);
      ButterfliesAcross(v);
      for (int j = 0; j < kVectors; ++j) hn::StoreU(v[j], d, data + offset + j * half);
    }
  }
}

// The first sweep with as many stages across vectors as n allows; returns the next partner distance.
template <bool kScale, bool kFactors, class D>
HWY_INLINE size_t FirstSweepOf(D d, const float* in, float scale, const float* factors, float* out, size_t n) {
  const size_t lanes = hn::Lanes(d);
  if (n >= 8 * lanes) return FirstSweep<3, kScale, kFactors>(d, in, scale, factors, out, n), 8 * lanes;
  if (n >= 4 * lanes) return FirstSweep<2, kScale, kFactors>(d, in, scale, factors, out, n), 4 * lanes;
  if (n >= 2 * lanes) return FirstSweep<1, kScale, kFactors>(d, in, scale, factors, out, n), 2 * lanes;
  return FirstSweep<0, kScale, kFactors>(d, in, scale, factors, out, n), lanes;
}

void ScaledMultiplyFwhtImpl(const float* in, float scale, const float* factors, float* out, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  if (n < lanes || lanes == 1 || lanes > 16) {
    reference::scaled_multiply_fwht(in, scale, factors, out, n);  // too short for a full vector
    return;
  }
  size_t half;
  if (scale != 1.0f)
    half = factors ? FirstSweepOf<true, true>(d, in, scale, factors, out, n)
                   : FirstSweepOf<true, false>(d, in, scale, factors, out, n);
  else
    half = factors ? FirstSweepOf<false, true>(d, in, scale, factors, out, n)
                   : FirstSweepOf<false, false>(d, in, scale, factors, out, n);
  for (; half * 8 <= n; half *= 8) RegisterBlockSweep<3>(d, out, n, half);
  if (half * 4 <= n) {
    RegisterBlockSweep<2>(d, out, n, half);
  } else if (half * 2 <= n) {
    RegisterBlockSweep<1>(d, out, n, half);
  }
}

void MultiplyFwhtImpl(float* data, const float* factors, size_t n) {
  ScaledMultiplyFwhtImpl(data, 1.0f, factors, data, n);
}

void FwhtImpl(float* data, size_t n) { MultiplyFwhtImpl(data, nullptr, n); }

void MultiplyImpl(float* data, const float* factors, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes)
    hn::StoreU(hn::Mul(hn::LoadU(d, data + i), hn::LoadU(d, factors + i)), d, data + i);
  for (; i < n; ++i) data[i] *= factors[i];
}

void ScaleImpl(float* data, float factor, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const auto f = hn::Set(d, factor);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(hn::Mul(hn::LoadU(d, data + i), f), d, data + i);
  for (; i < n; ++i) data[i] *= factor;
}

// kFixedOrderPartials partial sums regardless of vector width, reduced in the same fixed tree as
// the reference: several independent accumulators, so the adds do not wait on one another.
// Sum of x[i] * y[i] (y null: of x[i]) in reference::fixed_order_dot's order: the same bits.
template <bool kProducts>
HWY_INLINE float FixedOrderTerms(const float* x, const float* y, size_t n) {
  constexpr size_t kPartials = reference::kFixedOrderPartials;
  const hn::ScalableTag<float> d;
  constexpr size_t kLanes = hn::MaxLanes(d);
  const auto reference_sum = [&] {
    return kProducts ? reference::fixed_order_dot(x, y, n) : reference::fixed_order_sum(x, n);
  };
  if constexpr (kLanes < 4 || kLanes > kPartials || kPartials % kLanes != 0) {
    return reference_sum();
  } else {
    if (hn::Lanes(d) != kLanes) return reference_sum();
    constexpr size_t kVectors = kPartials / kLanes;
    const auto term = [&](size_t at) {
      if constexpr (kProducts) return hn::Mul(hn::LoadU(d, x + at), hn::LoadU(d, y + at));
      else return hn::LoadU(d, x + at);
    };
    hn::Vec<decltype(d)> acc[kVectors];
    for (size_t k = 0; k < kVectors; ++k) acc[k] = hn::Zero(d);
    size_t i = 0;
    for (; i + kPartials <= n; i += kPartials)
      for (size_t k = 0; k < kVectors; ++k) acc[k] = hn::Add(acc[k], term(i + k * kLanes));
    if (i < n) {
      // The last n - i terms go to partials 0, 1, ...: from zero-padded copies, so that the other
      // partials gain +0, which leaves them as they are (a partial starts at +0 and is never -0).
      HWY_ALIGN float tail_x[kPartials] = {}, tail_y[kPartials] = {};
      std::copy(x + i, x + n, tail_x);
      if constexpr (kProducts) std::copy(y + i, y + n, tail_y);
      for (size_t k = 0; k < kVectors && k * kLanes < n - i; ++k) {
        const auto v = hn::Load(d, tail_x + k * kLanes);
        acc[k] = hn::Add(acc[k], kProducts ? hn::Mul(v, hn::Load(d, tail_y + k * kLanes)) : v);
      }
    }
    return ReduceAccumulators(d, acc);
  }
}

float FixedOrderDotImpl(const float* x, const float* y, size_t n) { return FixedOrderTerms<true>(x, y, n); }
float FixedOrderSumImpl(const float* x, size_t n) { return FixedOrderTerms<false>(x, nullptr, n); }

float SumOfSquaresImpl(const float* x, size_t n) { return FixedOrderDotImpl(x, x, n); }

// out = in - centre (or a copy), and sum_of_squares(out) by the same partial sums, in one pass.
float SubtractSumOfSquaresImpl(const float* in, const float* centre, float* out, size_t n) {
  constexpr size_t kPartials = reference::kFixedOrderPartials;
  const hn::ScalableTag<float> d;
  constexpr size_t kLanes = hn::MaxLanes(d);
  size_t i = 0;
  HWY_ALIGN float partial[kPartials] = {};
  if constexpr (kLanes >= 4 && kLanes <= kPartials && kPartials % kLanes == 0) {
    if (hn::Lanes(d) == kLanes) {
      constexpr size_t kVectors = kPartials / kLanes;
      hn::Vec<decltype(d)> acc[kVectors];
      for (size_t k = 0; k < kVectors; ++k) acc[k] = hn::Zero(d);
      for (; i + kPartials <= n; i += kPartials)
        for (size_t k = 0; k < kVectors; ++k) {
          auto v = hn::LoadU(d, in + i + k * kLanes);
          if (centre) v = hn::Sub(v, hn::LoadU(d, centre + i + k * kLanes));
          hn::StoreU(v, d, out + i + k * kLanes);
          acc[k] = hn::Add(acc[k], hn::Mul(v, v));
        }
      if (i == n) return ReduceAccumulators(d, acc);
      for (size_t k = 0; k < kVectors; ++k) hn::Store(acc[k], d, partial + k * kLanes);
    }
  }
  for (; i < n; ++i) {
    out[i] = centre ? in[i] - centre[i] : in[i];
    partial[i % kPartials] += out[i] * out[i];
  }
  return reference::reduce_partials(partial);
}


// A kRows x kCols block of dot products: every loaded vector of a serves kCols products, every
// vector of b kRows; the tail of n (under a vector) is summed in scalars.
template <size_t kRows, size_t kCols>
HWY_INLINE void DotBlock(const float* a, const float* b, size_t n, float* out, size_t out_stride) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  hn::Vec<decltype(d)> acc[kRows][kCols];
  for (size_t r = 0; r < kRows; ++r)
    for (size_t c = 0; c < kCols; ++c) acc[r][c] = hn::Zero(d);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::Vec<decltype(d)> bv[kCols];
    for (size_t c = 0; c < kCols; ++c) bv[c] = hn::LoadU(d, b + c * n + i);
    for (size_t r = 0; r < kRows; ++r) {
      const auto av = hn::LoadU(d, a + r * n + i);
      for (size_t c = 0; c < kCols; ++c) acc[r][c] = hn::MulAdd(av, bv[c], acc[r][c]);
    }
  }
  for (size_t r = 0; r < kRows; ++r)
    for (size_t c = 0; c < kCols; ++c) {
      float sum = hn::GetLane(hn::SumOfLanes(d, acc[r][c]));
      for (size_t j = i; j < n; ++j) sum += a[r * n + j] * b[c * n + j];
      out[r * out_stride + c] = sum;
    }
}

void DotTileImpl(const float* a, size_t na, const float* b, size_t nb, size_t n, float* out, size_t out_stride) {
  size_t r = 0;
  for (; r + 4 <= na; r += 4) {
    size_t c = 0;
    for (; c + 4 <= nb; c += 4) DotBlock<4, 4>(a + r * n, b + c * n, n, out + r * out_stride + c, out_stride);
    for (; c < nb; ++c) DotBlock<4, 1>(a + r * n, b + c * n, n, out + r * out_stride + c, out_stride);
  }
  for (; r < na; ++r) {
    size_t c = 0;
    for (; c + 4 <= nb; c += 4) DotBlock<1, 4>(a + r * n, b + c * n, n, out + r * out_stride + c, out_stride);
    for (; c < nb; ++c) DotBlock<1, 1>(a + r * n, b + c * n, n, out + r * out_stride + c, out_stride);
  }
}

// A kRows x (kVecs vectors) tile of dot products against packed columns: each k broadcasts one
// value of every row and loads kVecs vectors of columns, so no horizontal sums are needed. Every
// product sums k in order with fused multiply-adds. Packed columns lie in strips of 16 (see
// pack_dot_panel), each strip k-major, so every vector streams through contiguous memory.
template <size_t kRows, size_t kVecs, class D>
HWY_INLINE void PanelTile(D d, const float* a, size_t n, const float* packed, size_t column, float* out,
                          size_t out_stride) {
  const size_t lanes = hn::Lanes(d);
  constexpr size_t kStrip = 16;
  const float* strip[kVecs];
  for (size_t v = 0; v < kVecs; ++v) {
    const size_t c = column + v * lanes;
    strip[v] = packed + (c / kStrip) * (n * kStrip) + c % kStrip;
  }
  hn::Vec<D> acc[kRows][kVecs];
  for (size_t r = 0; r < kRows; ++r)
    for (size_t v = 0; v < kVecs; ++v) acc[r][v] = hn::Zero(d);
  for (size_t k = 0; k < n; ++k) {
    hn::Vec<D> columns[kVecs];
    for (size_t v = 0; v < kVecs; ++v) columns[v] = hn::LoadU(d, strip[v] + k * kStrip);
    for (size_t r = 0; r < kRows; ++r) {
      const auto value = hn::Set(d, a[r * n + k]);
      for (size_t v = 0; v < kVecs; ++v) acc[r][v] = hn::MulAdd(value, columns[v], acc[r][v]);
    }
  }
  for (size_t r = 0; r < kRows; ++r)
    for (size_t v = 0; v < kVecs; ++v) hn::StoreU(acc[r][v], d, out + r * out_stride + column + v * lanes);
}

template <size_t kRows, size_t kVecs, class D>
HWY_INLINE void PanelColumns(D d, const float* a, size_t na, size_t n, const float* packed, size_t column, float* out,
                             size_t out_stride) {
  size_t r = 0;
  for (; r + kRows <= na; r += kRows) PanelTile<kRows, kVecs>(d, a + r * n, n, packed, column, out + r * out_stride, out_stride);
  for (; r < na; ++r) PanelTile<1, kVecs>(d, a + r * n, n, packed, column, out + r * out_stride, out_stride);
}

void DotPanelImpl(const float* a, size_t na, const float* packed, size_t columns, size_t n, float* out,
                  size_t out_stride) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  constexpr size_t kRows = 8, kVecs = 3;  // 24 accumulators of the 32 registers
#else
  constexpr size_t kRows = 4, kVecs = 2;  // 8 accumulators: fits 16 registers
#endif
  // Columns a panel at a time (kVecs vectors wide, n deep), the panel reused by every row while cached.
  size_t c = 0;
  for (; c + kVecs * lanes <= columns; c += kVecs * lanes) PanelColumns<kRows, kVecs>(d, a, na, n, packed, c, out, out_stride);
  for (; c < columns; c += lanes) PanelColumns<kRows, 1>(d, a, na, n, packed, c, out, out_stride);
}

void MatvecColumnsImpl(const float* matrix, size_t rows, size_t cols, const float* x, float* out) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  std::fill(out, out + rows, 0.0f);
  size_t r0 = 0;
  // Four output vectors per pass keep the column loads streaming; each out[r] still sums c in order.
  for (; r0 + 4 * lanes <= rows; r0 += 4 * lanes) {
    auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
    for (size_t c = 0; c < cols; ++c) {
      const float* column = matrix + c * rows + r0;
      const auto xc = hn::Set(d, x[c]);
      a0 = hn::Add(a0, hn::Mul(hn::LoadU(d, column), xc));
      a1 = hn::Add(a1, hn::Mul(hn::LoadU(d, column + lanes), xc));
      a2 = hn::Add(a2, hn::Mul(hn::LoadU(d, column + 2 * lanes), xc));
      a3 = hn::Add(a3, hn::Mul(hn::LoadU(d, column + 3 * lanes), xc));
    }
    hn::StoreU(a0, d, out + r0);
    hn::StoreU(a1, d, out + r0 + lanes);
    hn::StoreU(a2, d, out + r0 + 2 * lanes);
    hn::StoreU(a3, d, out + r0 + 3 * lanes);
  }
  for (; r0 + lanes <= rows; r0 += lanes) {
    auto a = hn::Zero(d);
    for (size_t c = 0; c < cols; ++c)
      a = hn::Add(a, hn::Mul(hn::LoadU(d, matrix + c * rows + r0), hn::Set(d, x[c])));
    hn::StoreU(a, d, out + r0);
  }
  for (; r0 < rows; ++r0) {
    float a = 0.0f;
    for (size_t c = 0; c < cols; ++c) a += matrix[c * rows + r0] * x[c];
    out[r0] = a;
  }
}

float DotImpl(const float* a, const float* b, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  auto s0 = hn::Zero(d), s1 = hn::Zero(d);
  size_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    s0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), s0);
    s1 = hn::MulAdd(hn::LoadU(d, a + i + lanes), hn::LoadU(d, b + i + lanes), s1);
  }
  for (; i + lanes <= n; i += lanes) s0 = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), s0);
  float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1)));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

uint32_t LargestMagnitudeBitsImpl(const float* x, size_t n) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const size_t lanes = hn::Lanes(df);
  const auto magnitude = hn::Set(du, 0x7FFFFFFFu);
  auto top0 = hn::Zero(du), top1 = hn::Zero(du);  // two chains
  size_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    top0 = hn::Max(top0, hn::And(hn::BitCast(du, hn::LoadU(df, x + i)), magnitude));
    top1 = hn::Max(top1, hn::And(hn::BitCast(du, hn::LoadU(df, x + i + lanes)), magnitude));
  }
  uint32_t top = hn::GetLane(hn::MaxOfLanes(du, hn::Max(top0, top1)));
  for (; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof(bits));
    top = std::max(top, bits & 0x7FFFFFFFu);
  }
  return top;
}

// The read bandwidth probe's pass: the sum of x in any order, each line asked for into L2 4 KiB
// before it is read, as the row kernels fetch theirs. Without, the hardware prefetchers alone read
// less than a kernel can, and fp16 decode measured above 100% of the probe (docs/RESULTS.md,
// "Kernel design measurements").
float StreamedSumImpl(const float* x, size_t n) {
  const hn::ScalableTag<float> d;
  constexpr size_t kLine = 64 / sizeof(float), kAhead = 4096 / sizeof(float), kLines = 4;
  const size_t lanes = hn::Lanes(d);
  auto sum0 = hn::Zero(d), sum1 = hn::Zero(d);
  size_t i = 0;
  if (lanes <= kLine) {
    for (; i + kLines * kLine <= n; i += kLines * kLine) {
      for (size_t line = 0; line < kLines; ++line) FetchLine(x + i + kAhead + line * kLine);  // no fault past the end
      for (size_t k = 0; k < kLines * kLine; k += 2 * lanes) {
        sum0 = hn::Add(sum0, hn::LoadU(d, x + i + k));
        sum1 = hn::Add(sum1, hn::LoadU(d, x + i + k + lanes));
      }
    }
  }
  float total = hn::GetLane(hn::SumOfLanes(d, hn::Add(sum0, sum1)));
  for (; i < n; ++i) total += x[i];
  return total;
}

// out[k] = x[indices[k]]: a vector gather where the target has one. The outlier split gathered
// its parts' channels one value at a time: 17% of a split policy's append.
void GatherFloatsImpl(const float* x, const uint32_t* indices, size_t n, float* out) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const size_t lanes = hn::Lanes(d);
  size_t k = 0;
  for (; k + lanes <= n; k += lanes)
    hn::StoreU(hn::GatherIndex(d, x, hn::BitCast(di, hn::LoadU(hn::RebindToUnsigned<decltype(d)>(), indices + k))), d,
               out + k);
  for (; k < n; ++k) out[k] = x[indices[k]];
}

// The screen of nearest_centroids: see kernels.hpp.
float ScreenLowerBoundsImpl(float* s, const float* squared, const float* norms, float base, float slope, size_t n,
                            float* lower) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const auto vbase = hn::Set(d, base), vslope = hn::Set(d, slope), two = hn::Set(d, 2.0f);
  auto largest = hn::Set(d, -std::numeric_limits<float>::infinity());
  size_t c = 0;
  for (; c + lanes <= n; c += lanes) {
    auto v = hn::LoadU(d, s + c);
    if (squared) {
      v = hn::Sub(hn::Mul(two, v), hn::LoadU(d, squared + c));
      hn::StoreU(v, d, s + c);
    }
    const auto low = hn::Sub(v, hn::MulAdd(vslope, hn::LoadU(d, norms + c), vbase));
    hn::StoreU(low, d, lower + c);
    largest = hn::Max(largest, low);
  }
  float out = hn::GetLane(hn::MaxOfLanes(d, largest));
  for (; c < n; ++c) {
    if (squared) s[c] = 2.0f * s[c] - squared[c];
    lower[c] = s[c] - (base + slope * norms[c]);
    out = lower[c] > out ? lower[c] : out;
  }
  return out;
}

size_t ScreenSelectImpl(const float* s, const float* norms, float base, float slope, float threshold, size_t n,
                        uint32_t* out) {
  const hn::ScalableTag<float> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  const size_t lanes = hn::Lanes(d);
  const auto vbase = hn::Set(d, base), vslope = hn::Set(d, slope), vthreshold = hn::Set(d, threshold);
  size_t count = 0, c = 0;
  for (; c + lanes <= n; c += lanes) {
    const auto upper = hn::Add(hn::LoadU(d, s + c), hn::MulAdd(vslope, hn::LoadU(d, norms + c), vbase));
    const auto reaches = hn::RebindMask(du, hn::Ge(upper, vthreshold));
    // Few reach it (a handful in a thousand): skip the compress, slow to memory on some CPUs.
    if (!hn::AllFalse(du, reaches))
      count += hn::CompressStore(hn::Iota(du, static_cast<uint32_t>(c)), reaches, du, out + count);
  }
  for (; c < n; ++c) {
    out[count] = static_cast<uint32_t>(c);
    count += s[c] + (base + slope * norms[c]) >= threshold ? 1 : 0;
  }
  return count;
}

// Exact widening, one add per element: the same sums on every target.
void AddToDoubleSumsImpl(const float* x, double* sums, size_t n) {
#if HWY_HAVE_FLOAT64
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const size_t lanes = hn::Lanes(dd);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes)
    hn::StoreU(hn::Add(hn::LoadU(dd, sums + i), hn::PromoteTo(dd, hn::LoadU(df, x + i))), dd, sums + i);
#else
  size_t i = 0;
#endif
  for (; i < n; ++i) sums[i] += static_cast<double>(x[i]);
}

void AxpyImpl(float w, const float* x, float* out, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const auto wv = hn::Set(d, w);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes)
    hn::StoreU(hn::MulAdd(wv, hn::LoadU(d, x + i), hn::LoadU(d, out + i)), d, out + i);
  for (; i < n; ++i) out[i] += w * x[i];
}

const char* TargetNameImpl() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace kvsketch::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvsketch::simd {

HWY_EXPORT(FwhtImpl);
HWY_EXPORT(MultiplyFwhtImpl);
HWY_EXPORT(ScaledMultiplyFwhtImpl);
HWY_EXPORT(MultiplyImpl);
HWY_EXPORT(ScaleImpl);
HWY_EXPORT(SumOfSquaresImpl);
HWY_EXPORT(FixedOrderDotImpl);
HWY_EXPORT(FixedOrderSumImpl);
HWY_EXPORT(MatvecColumnsImpl);
HWY_EXPORT(DotTileImpl);
HWY_EXPORT(DotPanelImpl);
HWY_EXPORT(DotImpl);
HWY_EXPORT(AxpyImpl);
HWY_EXPORT(SubtractSumOfSquaresImpl);
HWY_EXPORT(AddToDoubleSumsImpl);
HWY_EXPORT(LargestMagnitudeBitsImpl);
HWY_EXPORT(StreamedSumImpl);
HWY_EXPORT(GatherFloatsImpl);
HWY_EXPORT(ScreenLowerBoundsImpl);
HWY_EXPORT(ScreenSelectImpl);
HWY_EXPORT(TargetNameImpl);

void fwht(float* data, size_t n) { HWY_DYNAMIC_DISPATCH(FwhtImpl)(data, n); }
void multiply_fwht(float* data, const float* factors, size_t n) {
  HWY_DYNAMIC_DISPATCH(MultiplyFwhtImpl)(data, factors, n);
}
void scaled_multiply_fwht(const float* in, float scale, const float* factors, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(ScaledMultiplyFwhtImpl)(in, scale, factors, out, n);
}
void multiply(float* data, const float* factors, size_t n) { HWY_DYNAMIC_DISPATCH(MultiplyImpl)(data, factors, n); }
void scale(float* data, float factor, size_t n) { HWY_DYNAMIC_DISPATCH(ScaleImpl)(data, factor, n); }
float sum_of_squares(const float* x, size_t n) { return HWY_DYNAMIC_DISPATCH(SumOfSquaresImpl)(x, n); }
float fixed_order_dot(const float* x, const float* y, size_t n) {
  return HWY_DYNAMIC_DISPATCH(FixedOrderDotImpl)(x, y, n);
}
float fixed_order_sum(const float* x, size_t n) { return HWY_DYNAMIC_DISPATCH(FixedOrderSumImpl)(x, n); }
void matvec_columns(const float* matrix, size_t rows, size_t cols, const float* x, float* out) {
  HWY_DYNAMIC_DISPATCH(MatvecColumnsImpl)(matrix, rows, cols, x, out);
}
float dot(const float* a, const float* b, size_t n) { return HWY_DYNAMIC_DISPATCH(DotImpl)(a, b, n); }
void dot_tile(const float* a, size_t na, const float* b, size_t nb, size_t n, float* out, size_t out_stride) {
  HWY_DYNAMIC_DISPATCH(DotTileImpl)(a, na, b, nb, n, out, out_stride);
}
void pack_dot_panel(const float* b, size_t nb, size_t n, float* packed) {
  constexpr size_t kStrip = 16;
  std::fill(packed, packed + dot_panel_columns(nb) * n, 0.0f);
  for (size_t j = 0; j < nb; ++j)
    for (size_t k = 0; k < n; ++k) packed[(j / kStrip) * (n * kStrip) + k * kStrip + j % kStrip] = b[j * n + k];
}
void dot_panel(const float* a, size_t na, const float* packed, size_t columns, size_t n, float* out, size_t out_stride) {
  HWY_DYNAMIC_DISPATCH(DotPanelImpl)(a, na, packed, columns, n, out, out_stride);
}
void axpy(float w, const float* x, float* out, size_t n) { HWY_DYNAMIC_DISPATCH(AxpyImpl)(w, x, out, n); }
float subtract_sum_of_squares(const float* in, const float* centre, float* out, size_t n) {
  return HWY_DYNAMIC_DISPATCH(SubtractSumOfSquaresImpl)(in, centre, out, n);
}
void add_to_double_sums(const float* x, double* sums, size_t n) {
  HWY_DYNAMIC_DISPATCH(AddToDoubleSumsImpl)(x, sums, n);
}
void gather_floats(const float* x, const uint32_t* indices, size_t n, float* out) {
  HWY_DYNAMIC_DISPATCH(GatherFloatsImpl)(x, indices, n, out);
}
float streamed_sum(const float* x, size_t n) { return HWY_DYNAMIC_DISPATCH(StreamedSumImpl)(x, n); }
float screen_lower_bounds(float* s, const float* squared, const float* norms, float base, float slope, size_t n,
                          float* lower) {
  return HWY_DYNAMIC_DISPATCH(ScreenLowerBoundsImpl)(s, squared, norms, base, slope, n, lower);
}
size_t screen_select(const float* s, const float* norms, float base, float slope, float threshold, size_t n,
                     uint32_t* out) {
  return HWY_DYNAMIC_DISPATCH(ScreenSelectImpl)(s, norms, base, slope, threshold, n, out);
}
uint32_t largest_magnitude_bits(const float* x, size_t n) {
  return HWY_DYNAMIC_DISPATCH(LargestMagnitudeBitsImpl)(x, n);
}
const char* active_target() { return HWY_DYNAMIC_DISPATCH(TargetNameImpl)(); }

void select_target_from_environment() {
  const char* wanted = std::getenv("KVSKETCH_TARGET");
  if (wanted == nullptr || *wanted == '\0') return;
  std::string names;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    if (std::strcmp(hwy::TargetName(target), wanted) == 0) {
      hwy::SetSupportedTargetsForTest(target);
      return;
    }
    names += std::string(names.empty() ? "" : ", ") + hwy::TargetName(target);
  }
  throw Error(fmt::format("KVSKETCH_TARGET={} is not a target of this build and CPU; choose one of {}", wanted, names));
}

}  // namespace kvsketch::simd
#endif
