// ReduceAccumulators: the fixed-order reduction of a kernel's partial sums held in vectors (a
// Highway -inl header: included after hwy/foreach_target.h by the kernels that use it, once per
// target).
#if defined(KVSKETCH_SIMD_FIXED_ORDER_SUMS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVSKETCH_SIMD_FIXED_ORDER_SUMS_INL_H_
#undef KVSKETCH_SIMD_FIXED_ORDER_SUMS_INL_H_
#else
#define KVSKETCH_SIMD_FIXED_ORDER_SUMS_INL_H_
#endif

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {

// reduce_partials on kVectors accumulators holding partial[k * lanes + l]: the levels that add
// whole vectors (partial[i] += partial[i + width] for width >= lanes) in registers, the rest on the
// stored lanes; the same additions as the reference, so the same bits.
template <class D, size_t kVectors>
HWY_INLINE float ReduceAccumulators(D d, hwy::HWY_NAMESPACE::Vec<D> (&acc)[kVectors]) {
  namespace hn = hwy::HWY_NAMESPACE;
  for (size_t count = kVectors; count > 1; count /= 2)
    for (size_t k = 0; k < count / 2; ++k) acc[k] = hn::Add(acc[k], acc[k + count / 2]);
  HWY_ALIGN float lanes[hn::MaxLanes(d)];
  hn::Store(acc[0], d, lanes);
  for (size_t width = hn::Lanes(d) / 2; width >= 1; width /= 2)
    for (size_t i = 0; i < width; ++i) lanes[i] += lanes[i + width];
  return lanes[0];
}

}  // namespace HWY_NAMESPACE
}  // namespace kvsketch::simd
HWY_AFTER_NAMESPACE();

#endif  // KVSKETCH_SIMD_FIXED_ORDER_SUMS_INL_H_
