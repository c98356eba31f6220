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
#include "simd/exp_non_positive-inl.h"
#include "simd/half_floats-inl.h"
#include "simd/row_kernels.hpp"

HWY_BEFORE_NAMESPACE();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using FloatTag = hn::ScalableTag<float>;
using HalfTag = hn::Rebind<hwy::float16_t, FloatTag>;

HWY_INLINE hn::Vec<FloatTag> LoadHalf(const uint16_t* p) {
  return LoadHalves(FloatTag(), p);
}

void HalfToFloatRowImpl(const uint16_t* in, size_t n, float* out) {
  const FloatTag df;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(LoadHalf(in + i), df, out + i);
  for (; i < n; ++i) out[i] = half_to_float(in[i]);
}

void FloatToHalfRowImpl(const float* in, size_t n, uint16_t* out) {
  size_t i = 0;
#if HWY_ARCH_X86 && HWY_TARGET != HWY_SSE4 && HWY_TARGET != HWY_SSSE3 && HWY_TARGET != HWY_EMU128 && \
    HWY_TARGET != HWY_SCALAR
  // F16C (AVX2 and up) rounds to nearest even, as float_to_half does. Highway emulates the
  // conversion on the targets without it by truncating, which would store other halves there
  // (other architectures take the scalar conversion too: the same bits everywhere).
  const FloatTag df;
  const HalfTag dh;
  const size_t lanes = hn::Lanes(df);
  for (; i + lanes <= n; i += lanes)
    hn::StoreU(hn::DemoteTo(dh, hn::LoadU(df, in + i)), dh, reinterpret_cast<hwy::float16_t*>(out + i));
#endif
  for (; i < n; ++i) out[i] = float_to_half(in[i]);
}

float ExpShiftedSumImpl(float* x, size_t n, float shift) {
  const FloatTag df;
  const size_t lanes = hn::Lanes(df);
  const auto s = hn::Set(df, shift);
  auto total = hn::Zero(df);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto e = ExpNonPositive(df, hn::Sub(hn::LoadU(df, x + i), s));
    hn::StoreU(e, df, x + i);
    total = hn::Add(total, e);
  }
  if (i < n) {  // the tail through a padded vector, so that every element takes the same path
    HWY_ALIGN float tail[hn::MaxLanes(FloatTag())];
    std::fill(std::copy(x + i, x + n, tail), tail + lanes, shift);
    const auto e = hn::IfThenElseZero(hn::FirstN(df, n - i), ExpNonPositive(df, hn::Sub(hn::Load(df, tail), s)));
    hn::Store(e, df, tail);
    std::copy_n(tail, n - i, x + i);
    total = hn::Add(total, e);
  }
  return hn::GetLane(hn::SumOfLanes(df, total));
}

float MaxValueImpl(const float* x, size_t n) {
  const FloatTag df;
  const size_t lanes = hn::Lanes(df);
  // Four chains: one waited a max's latency per vector. (The maximum is the same in any order.)
  auto best0 = hn::Set(df, -std::numeric_limits<float>::infinity()), best1 = best0, best2 = best0, best3 = best0;
  size_t i = 0;
  for (; i + 4 * lanes <= n; i += 4 * lanes) {
    best0 = hn::Max(best0, hn::LoadU(df, x + i));
    best1 = hn::Max(best1, hn::LoadU(df, x + i + lanes));
    best2 = hn::Max(best2, hn::LoadU(df, x + i + 2 * lanes));
    best3 = hn::Max(best3, hn::LoadU(df, x + i + 3 * lanes));
  }
  for (; i + lanes <= n; i += lanes) best0 = hn::Max(best0, hn::LoadU(df, x + i));
  const auto best = hn::Max(hn::Max(best0, best1), hn::Max(best2, best3));
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
HWY_EXPORT(ExpShiftedSumImpl);
HWY_EXPORT(MaxValueImpl);

void half_to_float_row(const uint16_t* in, size_t n, float* out) { HWY_DYNAMIC_DISPATCH(HalfToFloatRowImpl)(in, n, out); }
void float_to_half_row(const float* in, size_t n, uint16_t* out) {
  HWY_DYNAMIC_DISPATCH(FloatToHalfRowImpl)(in, n, out);
}
void half_row_scores(const float* queries, size_t heads, const uint16_t* keys, size_t n, size_t d, float scale,
                     float* scores, size_t stride) {
  const RowSource rows{RowFormat::kHalf, reinterpret_cast<const uint8_t*>(keys), 2 * d, d};
  row_scores(rows, n, queries, heads, scale, scores, stride);
}
void float_row_scores(const float* queries, size_t heads, const float* keys, size_t n, size_t d, float scale,
                      float* scores, size_t stride) {
  const RowSource rows{RowFormat::kFloat, reinterpret_cast<const uint8_t*>(keys), 4 * d, d};
  row_scores(rows, n, queries, heads, scale, scores, stride);
}
void half_row_weighted_sum(const float* weights, size_t heads, size_t stride, const uint16_t* values, size_t n,
                           size_t d, float* acc) {
  const RowSource rows{RowFormat::kHalf, reinterpret_cast<const uint8_t*>(values), 2 * d, d};
  row_weighted_sum(rows, n, weights, heads, stride, acc, d);
}
void float_row_weighted_sum(const float* weights, size_t heads, size_t stride, const float* rows, size_t n, size_t d,
                            float* acc) {
  const RowSource source{RowFormat::kFloat, reinterpret_cast<const uint8_t*>(rows), 4 * d, d};
  row_weighted_sum(source, n, weights, heads, stride, acc, d);
}
float exp_shifted_sum(float* x, size_t n, float shift) { return HWY_DYNAMIC_DISPATCH(ExpShiftedSumImpl)(x, n, shift); }
float max_value(const float* x, size_t n) { return HWY_DYNAMIC_DISPATCH(MaxValueImpl)(x, n); }

}  // namespace kvsketch::simd
#endif
