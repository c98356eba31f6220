// Highway implementation of affine_kernels.hpp, compiled per instruction set.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/simd/affine_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "simd/affine_kernels.hpp"

HWY_BEFORE_NAMESPACE();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void AffineDecodeImpl(const uint8_t* levels, size_t n, const float* low, const float* step, size_t group, int offset,
                      float* out) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<uint8_t, decltype(df)> du8;
  const size_t lanes = hn::Lanes(df);
  const auto shift = hn::Set(di, offset);
  const auto level = [&](size_t c) { return hn::ConvertTo(df, hn::Sub(hn::PromoteTo(di, hn::LoadU(du8, levels + c)), shift)); };
  size_t c = 0;
  if (group == 1) {  // a minimum and step per coordinate
    for (; c + lanes <= n; c += lanes)
      hn::StoreU(hn::Add(hn::LoadU(df, low + c), hn::Mul(hn::LoadU(df, step + c), level(c))), df, out + c);
  } else if (group % lanes == 0) {  // one minimum and step per vector
    for (; c + lanes <= n; c += lanes) {
      const size_t g = c / group;
      hn::StoreU(hn::Add(hn::Set(df, low[g]), hn::Mul(hn::Set(df, step[g]), level(c))), df, out + c);
    }
  }
  for (; c < n; ++c)
    out[c] = low[c / group] + step[c / group] * static_cast<float>(static_cast<int>(levels[c]) - offset);
}

}  // namespace HWY_NAMESPACE
}  // namespace kvsketch::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvsketch::simd {

HWY_EXPORT(AffineDecodeImpl);

void affine_decode(const uint8_t* levels, size_t n, const float* low, const float* step, size_t group, int offset,
                   float* out) {
  HWY_DYNAMIC_DISPATCH(AffineDecodeImpl)(levels, n, low, step, group, offset, out);
}

}  // namespace kvsketch::simd
#endif
