// What every integer-index kernel module shares per SIMD target (a Highway -inl header, included
// after hwy/foreach_target.h, once per target): the target attributes its code is compiled with,
// whether the target has the x86 kernels, and the vector types.
#if defined(KVSKETCH_SIMD_INT_INDEX_TARGET_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVSKETCH_SIMD_INT_INDEX_TARGET_INL_H_
#undef KVSKETCH_SIMD_INT_INDEX_TARGET_INL_H_
#else
#define KVSKETCH_SIMD_INT_INDEX_TARGET_INL_H_
#endif

#include <hwy/highway.h>

// Highway 1.0's target string for AVX3_DL names "avxvnni" (the VEX form) where the EVEX form is
// meant; the runtime check of the target includes AVX512-VNNI. AMX is enabled for the tile
// kernels of int_index_amx-inl.h, which run only where amx_usable() says so. Each module's code
// lies between KVSKETCH_INT_INDEX_BEGIN(); and KVSKETCH_INT_INDEX_END();: GCC takes a pragma after
// Highway's; clang's pragma attribute must come before Highway's, as the outermost target
// attribute is the one that applies. Lambdas with an attribute of their own take
// KVSKETCH_KERNEL_ATTR.
#undef KVSKETCH_KERNEL_ATTR
#undef KVSKETCH_INT_INDEX_BEGIN
#undef KVSKETCH_INT_INDEX_END
#if HWY_TARGET == HWY_AVX3_DL
#define KVSKETCH_KERNEL_ATTR __attribute__((target(HWY_TARGET_STR ",avx512vnni,amx-tile,amx-int8")))
#if defined(__clang__)
#define KVSKETCH_INT_INDEX_BEGIN() \
  HWY_PUSH_ATTRIBUTES(HWY_TARGET_STR ",avx512vnni,amx-tile,amx-int8") HWY_BEFORE_NAMESPACE()
#define KVSKETCH_INT_INDEX_END() \
  HWY_AFTER_NAMESPACE();         \
  HWY_POP_ATTRIBUTES static_assert(true, "a trailing semicolon")
#else
#define KVSKETCH_INT_INDEX_BEGIN() \
  HWY_BEFORE_NAMESPACE();          \
  _Pragma("GCC target(\"avx512vnni,amx-tile,amx-int8\")") static_assert(true, "a trailing semicolon")
#define KVSKETCH_INT_INDEX_END() HWY_AFTER_NAMESPACE()
#endif
#else
#define KVSKETCH_KERNEL_ATTR HWY_ATTR
#define KVSKETCH_INT_INDEX_BEGIN() HWY_BEFORE_NAMESPACE()
#define KVSKETCH_INT_INDEX_END() HWY_AFTER_NAMESPACE()
#endif

// The integer kernels are written with x86 instructions (pshufb, pmaddubsw, vpdpbusd); other
// architectures and the portable targets take the reference arithmetic, with the same bits.
#undef KVSKETCH_INT_INDEX_X86
#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
#define KVSKETCH_INT_INDEX_X86 1
#else
#define KVSKETCH_INT_INDEX_X86 0
#endif

KVSKETCH_INT_INDEX_BEGIN();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DU8 = hn::ScalableTag<uint8_t>;
using DI8 = hn::ScalableTag<int8_t>;
using DI16 = hn::ScalableTag<int16_t>;
using DI32 = hn::ScalableTag<int32_t>;
using DI64 = hn::ScalableTag<int64_t>;
using DF = hn::ScalableTag<float>;
using VU8 = hn::Vec<DU8>;
using VI8 = hn::Vec<DI8>;
using VI16 = hn::Vec<DI16>;
using VI32 = hn::Vec<DI32>;

}  // namespace HWY_NAMESPACE
}  // namespace kvsketch::simd
KVSKETCH_INT_INDEX_END();

#endif  // KVSKETCH_SIMD_INT_INDEX_TARGET_INL_H_
