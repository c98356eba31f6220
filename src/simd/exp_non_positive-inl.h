// exp(x) for x <= 0 as softmax weights need it, per instruction set (a Highway -inl header:
// included after hwy/foreach_target.h by the kernels that use it, once per target).
#if defined(KVSKETCH_SIMD_EXP_NON_POSITIVE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVSKETCH_SIMD_EXP_NON_POSITIVE_INL_H_
#undef KVSKETCH_SIMD_EXP_NON_POSITIVE_INL_H_
#else
#define KVSKETCH_SIMD_EXP_NON_POSITIVE_INL_H_
#endif

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {

// x = q ln 2 + r with q = round(x / ln 2) (ln 2 in two parts, so that r is exact to a float), e^r by
// its Taylor polynomial of degree 6 (|r| <= ln(2) / 2: relative error below 1.3e-7), then 2^q put
// into the exponent. Below -86 the weight is below 1e-37 of the largest and is 0, which also keeps
// every result a normal float (a denormal would cost a microcode assist per lane). Every operation
// is per lane: a lane's result does not depend on the vector's width.
template <class D>
HWY_INLINE hwy::HWY_NAMESPACE::Vec<D> ExpNonPositive(D df, hwy::HWY_NAMESPACE::Vec<D> x) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::RebindToSigned<D> di;
  const auto live = hn::Ge(x, hn::Set(df, -86.0f));
  x = hn::Max(x, hn::Set(df, -86.0f));
  const auto q = hn::Round(hn::Mul(x, hn::Set(df, 1.44269504088896341f)));
  auto r = hn::MulAdd(q, hn::Set(df, -0.693145751953125f), x);
  r = hn::MulAdd(q, hn::Set(df, -1.428606765330187045e-6f), r);
  auto p = hn::Set(df, 1.0f / 720);
  p = hn::MulAdd(p, r, hn::Set(df, 1.0f / 120));
  p = hn::MulAdd(p, r, hn::Set(df, 1.0f / 24));
  p = hn::MulAdd(p, r, hn::Set(df, 1.0f / 6));
  p = hn::MulAdd(p, r, hn::Set(df, 0.5f));
  p = hn::MulAdd(p, r, hn::Set(df, 1.0f));
  p = hn::MulAdd(p, r, hn::Set(df, 1.0f));
#if HWY_TARGET <= HWY_AVX3
  // p 2^q in one instruction (the same exact product; q >= -125, so no denormal).
  (void)di;
  if constexpr (hn::MaxLanes(D()) * sizeof(float) == 64)
    return hn::IfThenElseZero(live, hn::Vec<D>{_mm512_scalef_ps(p.raw, q.raw)});
#endif
  const auto power = hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, q), hn::Set(di, 127))));
  return hn::IfThenElseZero(live, hn::Mul(p, power));
}

}  // namespace HWY_NAMESPACE
}  // namespace kvsketch::simd
HWY_AFTER_NAMESPACE();

#endif  // KVSKETCH_SIMD_EXP_NON_POSITIVE_INL_H_
