// Highway implementations of attention_kernels.hpp, compiled per instruction set.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/simd/attention_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kvsketch/half.hpp"
#include "simd/attention_kernels.hpp"

HWY_BEFORE_NAMESPACE();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using FloatTag = hn::ScalableTag<float>;
using HalfTag = hn::Rebind<hwy::float16_t, FloatTag>;

HWY_INLINE hn::Vec<FloatTag> LoadHalf(const uint16_t* p) {
  const FloatTag df;
  const HalfTag dh;
  return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
}

void HalfToFloatRowImpl(const uint16_t* in, size_t n, float* out) {
  const FloatTag df;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(LoadHalf(in + i), df, out + i);
  for (; i < n; ++i) out[i] = half_to_float(in[i]);
}

void FloatToHalfRowImpl(const float* in, size_t n, uint16_t* out) {
  const FloatTag df;
  const HalfTag dh;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes)
    hn::StoreU(hn::DemoteTo(dh, hn::LoadU(df, in + i)), dh, reinterpret_cast<hwy::float16_t*>(out + i));
  for (; i < n; ++i) out[i] = float_to_half(in[i]);
}

// Up to four heads per pass: each key row is converted once and multiplied into four sums.
template <int kHeads, bool kHalf>
void ScoresForHeads(const float* queries, const void* keys, size_t n, size_t d, float scale, float* scores,
                    size_t stride) {
  const FloatTag df;
  const size_t lanes = hn::Lanes(df);
  const size_t full = d / lanes * lanes;
  for (size_t i = 0; i < n; ++i) {
    const uint16_t* half_row = static_cast<const uint16_t*>(keys) + i * d;
    const float* float_row = static_cast<const float*>(keys) + i * d;
    hn::Vec<FloatTag> acc[kHeads];
    for (int h = 0; h < kHeads; ++h) acc[h] = hn::Zero(df);
    for (size_t j = 0; j < full; j += lanes) {
      const auto k = kHalf ? LoadHalf(half_row + j) : hn::LoadU(df, float_row + j);
      for (int h = 0; h < kHeads; ++h) acc[h] = hn::MulAdd(hn::LoadU(df, queries + h * d + j), k, acc[h]);
    }
    for (int h = 0; h < kHeads; ++h) {
      float sum = hn::GetLane(hn::SumOfLanes(df, acc[h]));
      for (size_t j = full; j < d; ++j) sum += queries[h * d + j] * (kHalf ? half_to_float(half_row[j]) : float_row[j]);
      scores[h * stride + i] = sum * scale;
    }
  }
}

template <bool kHalf>
void RowScores(const float* queries, size_t heads, const void* keys, size_t n, size_t d, float scale, float* scores,
               size_t stride) {
  size_t h = 0;
  for (; h + 4 <= heads; h += 4)
    ScoresForHeads<4, kHalf>(queries + h * d, keys, n, d, scale, scores + h * stride, stride);
  for (; h + 2 <= heads; h += 2)
    ScoresForHeads<2, kHalf>(queries + h * d, keys, n, d, scale, scores + h * stride, stride);
  for (; h < heads; ++h) ScoresForHeads<1, kHalf>(queries + h * d, keys, n, d, scale, scores + h * stride, stride);
}

void HalfRowScoresImpl(const float* queries, size_t heads, const uint16_t* keys, size_t n, size_t d, float scale,
                       float* scores, size_t stride) {
  RowScores<true>(queries, heads, keys, n, d, scale, scores, stride);
}

void FloatRowScoresImpl(const float* queries, size_t heads, const float* keys, size_t n, size_t d, float scale,
                        float* scores, size_t stride) {
  RowScores<false>(queries, heads, keys, n, d, scale, scores, stride);
}

// Rows in blocks that stay in L1; within a block one vector column of the output per head is
// held in registers while the rows stream past it.
template <int kHeads, bool kHalf>
void WeightedSumForHeads(const float* weights, size_t stride, const void* rows, size_t n, size_t d, float* acc) {
  const FloatTag df;
  const size_t lanes = hn::Lanes(df);
  const size_t full = d / lanes * lanes;
  constexpr size_t kBlock = 64;
  for (size_t start = 0; start < n; start += kBlock) {
    const size_t end = std::min(n, start + kBlock);
    for (size_t j = 0; j < full; j += lanes) {
      hn::Vec<FloatTag> sum[kHeads];
      for (int h = 0; h < kHeads; ++h) sum[h] = hn::LoadU(df, acc + h * d + j);
      for (size_t i = start; i < end; ++i) {
        const auto v = kHalf ? LoadHalf(static_cast<const uint16_t*>(rows) + i * d + j)
                             : hn::LoadU(df, static_cast<const float*>(rows) + i * d + j);
        for (int h = 0; h < kHeads; ++h) sum[h] = hn::MulAdd(hn::Set(df, weights[h * stride + i]), v, sum[h]);
      }
      for (int h = 0; h < kHeads; ++h) hn::StoreU(sum[h], df, acc + h * d + j);
    }
    for (size_t j = full; j < d; ++j)
      for (size_t i = start; i < end; ++i) {
        const float v = kHalf ? half_to_float(static_cast<const uint16_t*>(rows)[i * d + j])
                              : static_cast<const float*>(rows)[i * d + j];
        for (int h = 0; h < kHeads; ++h) acc[h * d + j] += weights[h * stride + i] * v;
      }
  }
}

template <bool kHalf>
void WeightedSum(const float* weights, size_t heads, size_t stride, const void* rows, size_t n, size_t d,
                 float* acc) {
  size_t h = 0;
  for (; h + 4 <= heads; h += 4)
    WeightedSumForHeads<4, kHalf>(weights + h * stride, stride, rows, n, d, acc + h * d);
  for (; h < heads; ++h) WeightedSumForHeads<1, kHalf>(weights + h * stride, stride, rows, n, d, acc + h * d);
}

void HalfRowWeightedSumImpl(const float* weights, size_t heads, size_t stride, const uint16_t* values, size_t n,
                            size_t d, float* acc) {
  WeightedSum<true>(weights, heads, stride, values, n, d, acc);
}

void FloatRowWeightedSumImpl(const float* weights, size_t heads, size_t stride, const float* rows, size_t n, size_t d,
                             float* acc) {
  WeightedSum<false>(weights, heads, stride, rows, n, d, acc);
}

float ExpShiftedSumImpl(float* x, size_t n, float shift) {
  const FloatTag df;
  const size_t lanes = hn::Lanes(df);
  const auto s = hn::Set(df, shift);
  auto total = hn::Zero(df);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto e = hn::Exp(df, hn::Sub(hn::LoadU(df, x + i), s));
    hn::StoreU(e, df, x + i);
    total = hn::Add(total, e);
  }
  float sum = hn::GetLane(hn::SumOfLanes(df, total));
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - shift);
    sum += x[i];
  }
  return sum;
}

float MaxValueImpl(const float* x, size_t n) {
  const FloatTag df;
  const size_t lanes = hn::Lanes(df);
  auto best = hn::Set(df, -std::numeric_limits<float>::infinity());
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) best = hn::Max(best, hn::LoadU(df, x + i));
  float result = hn::GetLane(hn::MaxOfLanes(df, best));
  for (; i < n; ++i) result = std::max(result, x[i]);
  return result;
}

}  // namespace HWY_NAMESPACE
}  // namespace kvsketch::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvsketch::simd {

HWY_EXPORT(HalfToFloatRowImpl);
HWY_EXPORT(FloatToHalfRowImpl);
HWY_EXPORT(HalfRowScoresImpl);
HWY_EXPORT(FloatRowScoresImpl);
HWY_EXPORT(HalfRowWeightedSumImpl);
HWY_EXPORT(FloatRowWeightedSumImpl);
HWY_EXPORT(ExpShiftedSumImpl);
HWY_EXPORT(MaxValueImpl);

void half_to_float_row(const uint16_t* in, size_t n, float* out) { HWY_DYNAMIC_DISPATCH(HalfToFloatRowImpl)(in, n, out); }
void float_to_half_row(const float* in, size_t n, uint16_t* out) {
  HWY_DYNAMIC_DISPATCH(FloatToHalfRowImpl)(in, n, out);
}
void half_row_scores(const float* queries, size_t heads, const uint16_t* keys, size_t n, size_t d, float scale,
                     float* scores, size_t stride) {
  HWY_DYNAMIC_DISPATCH(HalfRowScoresImpl)(queries, heads, keys, n, d, scale, scores, stride);
}
void float_row_scores(const float* queries, size_t heads, const float* keys, size_t n, size_t d, float scale,
                      float* scores, size_t stride) {
  HWY_DYNAMIC_DISPATCH(FloatRowScoresImpl)(queries, heads, keys, n, d, scale, scores, stride);
}
void half_row_weighted_sum(const float* weights, size_t heads, size_t stride, const uint16_t* values, size_t n,
                           size_t d, float* acc) {
  HWY_DYNAMIC_DISPATCH(HalfRowWeightedSumImpl)(weights, heads, stride, values, n, d, acc);
}
void float_row_weighted_sum(const float* weights, size_t heads, size_t stride, const float* rows, size_t n, size_t d,
                            float* acc) {
  HWY_DYNAMIC_DISPATCH(FloatRowWeightedSumImpl)(weights, heads, stride, rows, n, d, acc);
}
float exp_shifted_sum(float* x, size_t n, float shift) { return HWY_DYNAMIC_DISPATCH(ExpShiftedSumImpl)(x, n, shift); }
float max_value(const float* x, size_t n) { return HWY_DYNAMIC_DISPATCH(MaxValueImpl)(x, n); }

}  // namespace kvsketch::simd
#endif
