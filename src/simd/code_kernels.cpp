// Highway implementations of code_kernels.hpp, compiled per instruction set.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/simd/code_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstring>

#include "simd/code_kernels.hpp"

HWY_BEFORE_NAMESPACE();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void Int8ToFloatsImpl(const uint8_t* codes, size_t count, float* out) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> di8;
  const size_t lanes = hn::Lanes(df);
  const int8_t* signed_codes = reinterpret_cast<const int8_t*>(codes);
  size_t j = 0;
  for (; j + lanes <= count; j += lanes)
    hn::StoreU(hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(di8, signed_codes + j))), df, out + j);
  for (; j < count; ++j) out[j] = static_cast<float>(signed_codes[j]);
}

}  // namespace HWY_NAMESPACE
}  // namespace kvsketch::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvsketch::simd {

HWY_EXPORT(Int8ToFloatsImpl);

void int8_to_floats(const uint8_t* codes, size_t count, float* out) {
  HWY_DYNAMIC_DISPATCH(Int8ToFloatsImpl)(codes, count, out);
}

}  // namespace kvsketch::simd
#endif
