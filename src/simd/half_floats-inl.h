// fp16 to float conversion per instruction set (a Highway -inl header: included after
// hwy/foreach_target.h by the kernels that use it, once per target). Highway's emulated targets
// (EMU128, SCALAR) convert Inf and NaN halves to finite numbers (65536, 98304): there each lane goes
// through kvsketch::half_to_float, so that a stored Inf or NaN reads as one on every target and the
// loaders' checks see it.
#if defined(KVSKETCH_SIMD_HALF_FLOATS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVSKETCH_SIMD_HALF_FLOATS_INL_H_
#undef KVSKETCH_SIMD_HALF_FLOATS_INL_H_
#else
#define KVSKETCH_SIMD_HALF_FLOATS_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>
#include <cstring>

#include "kvsketch/half.hpp"

HWY_BEFORE_NAMESPACE();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Lanes(df) halves from p (any alignment) as floats.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadHalves(DF df, const void* p) {
#if HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SCALAR
  HWY_ALIGN float lanes[hn::MaxLanes(DF())];
  const auto* bytes = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < hn::Lanes(df); ++i) {
    uint16_t bits;
    std::memcpy(&bits, bytes + 2 * i, sizeof(bits));
    lanes[i] = half_to_float(bits);
  }
  return hn::Load(df, lanes);
#else
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, static_cast<const hwy::float16_t*>(p)));
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace kvsketch::simd
HWY_AFTER_NAMESPACE();

#endif
