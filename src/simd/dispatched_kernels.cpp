// Highway implementations of the kernels in kernels.hpp, compiled once per instruction set and
// chosen at run time. Element-wise operations only on the encode path (see kernels.hpp).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/simd/dispatched_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>

#include "simd/kernels.hpp"

HWY_BEFORE_NAMESPACE();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Butterflies with partner distance `half` smaller than the vector: permute lanes (i xor half)
// and combine as v * sign + partner, where sign = +1 for the lower element and -1 for the upper.
template <class D>
void FwhtInRegister(D d, float* data, size_t n, size_t half) {
  const size_t lanes = hn::Lanes(d);
  HWY_ALIGN int32_t partner[64];
  HWY_ALIGN float signs[64];
  for (size_t i = 0; i < lanes; ++i) {
    partner[i] = static_cast<int32_t>(i ^ half);
    signs[i] = (i & half) ? -1.0f : 1.0f;
  }
  const auto indices = hn::SetTableIndices(d, partner);
  const auto sign = hn::Load(d, signs);
  for (size_t i = 0; i < n; i += lanes) {
    const auto v = hn::LoadU(d, data + i);
    const auto swapped = hn::TableLookupLanes(v, indices);
    // lower element: v + partner; upper element: partner - v. (v * -1 is exact, so no FMA issue.)
    hn::StoreU(hn::Add(hn::Mul(v, sign), swapped), d, data + i);
  }
}

void FwhtImpl(float* data, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  if (n < lanes || lanes == 1) {
    reference::fwht(data, n);  // too short for a full vector: same butterflies, scalar
    return;
  }
  size_t half = 1;
  for (; half < lanes; half *= 2) FwhtInRegister(d, data, n, half);
  for (; half < n; half *= 2) {
    for (size_t block = 0; block < n; block += 2 * half) {
      for (size_t i = block; i < block + half; i += lanes) {
        const auto a = hn::LoadU(d, data + i);
        const auto b = hn::LoadU(d, data + i + half);
        hn::StoreU(hn::Add(a, b), d, data + i);
        hn::StoreU(hn::Sub(a, b), d, data + i + half);
      }
    }
  }
}

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

// 16 partial sums regardless of vector width, reduced in the same fixed tree as the reference.
float SumOfSquaresImpl(const float* x, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  if (lanes < 4 || lanes > 16 || 16 % lanes != 0) return reference::sum_of_squares(x, n);
  HWY_ALIGN float partial[16] = {};
  const size_t vectors = 16 / lanes;
  auto acc0 = hn::Zero(d), acc1 = hn::Zero(d), acc2 = hn::Zero(d), acc3 = hn::Zero(d);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    auto v0 = hn::LoadU(d, x + i);
    acc0 = hn::Add(acc0, hn::Mul(v0, v0));
    if (vectors > 1) {
      auto v1 = hn::LoadU(d, x + i + lanes);
      acc1 = hn::Add(acc1, hn::Mul(v1, v1));
    }
    if (vectors > 2) {
      auto v2 = hn::LoadU(d, x + i + 2 * lanes);
      auto v3 = hn::LoadU(d, x + i + 3 * lanes);
      acc2 = hn::Add(acc2, hn::Mul(v2, v2));
      acc3 = hn::Add(acc3, hn::Mul(v3, v3));
    }
  }
  hn::Store(acc0, d, partial);
  if (vectors > 1) hn::Store(acc1, d, partial + lanes);
  if (vectors > 2) {
    hn::Store(acc2, d, partial + 2 * lanes);
    hn::Store(acc3, d, partial + 3 * lanes);
  }
  for (; i < n; ++i) partial[i % 16] += x[i] * x[i];
  for (size_t width = 8; width >= 1; width /= 2)
    for (size_t i = 0; i < width; ++i) partial[i] += partial[i + width];
  return partial[0];
}

// Writes the int32 lanes (each < 256) as bytes.
template <class DI, class V>
HWY_INLINE void StoreIndices(DI di, V index, uint8_t* out, int32_t* scratch) {
#if HWY_TARGET == HWY_SCALAR
  hn::Store(index, di, scratch);
  out[0] = static_cast<uint8_t>(scratch[0]);
#else
  (void)scratch;
  const hn::Rebind<uint8_t, DI> du8;
  hn::StoreU(hn::DemoteTo(du8, index), du8, out);
#endif
}

void QuantizeImpl(const float* values, size_t n, const float* boundaries, int bits, uint8_t* indices) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const size_t lanes = hn::Lanes(d);
  const int count = (1 << bits) - 1;
  HWY_ALIGN int32_t lane_indices[64];
  size_t i = 0;
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
HWY_EXPORT(MultiplyImpl);
HWY_EXPORT(ScaleImpl);
HWY_EXPORT(SumOfSquaresImpl);
HWY_EXPORT(QuantizeImpl);
HWY_EXPORT(MatvecColumnsImpl);
HWY_EXPORT(SignBitsImpl);
HWY_EXPORT(DotImpl);
HWY_EXPORT(AxpyImpl);
HWY_EXPORT(TargetNameImpl);

void fwht(float* data, size_t n) { HWY_DYNAMIC_DISPATCH(FwhtImpl)(data, n); }
void multiply(float* data, const float* factors, size_t n) { HWY_DYNAMIC_DISPATCH(MultiplyImpl)(data, factors, n); }
void scale(float* data, float factor, size_t n) { HWY_DYNAMIC_DISPATCH(ScaleImpl)(data, factor, n); }
float sum_of_squares(const float* x, size_t n) { return HWY_DYNAMIC_DISPATCH(SumOfSquaresImpl)(x, n); }
void quantize(const float* values, size_t n, const float* boundaries, int bits, uint8_t* indices) {
  HWY_DYNAMIC_DISPATCH(QuantizeImpl)(values, n, boundaries, bits, indices);
}
void sign_bits(const float* x, size_t n, uint8_t* packed) { HWY_DYNAMIC_DISPATCH(SignBitsImpl)(x, n, packed); }
void matvec_columns(const float* matrix, size_t rows, size_t cols, const float* x, float* out) {
  HWY_DYNAMIC_DISPATCH(MatvecColumnsImpl)(matrix, rows, cols, x, out);
}
float dot(const float* a, const float* b, size_t n) { return HWY_DYNAMIC_DISPATCH(DotImpl)(a, b, n); }
void axpy(float w, const float* x, float* out, size_t n) { HWY_DYNAMIC_DISPATCH(AxpyImpl)(w, x, out, n); }
const char* active_target() { return HWY_DYNAMIC_DISPATCH(TargetNameImpl)(); }

}  // namespace kvsketch::simd
#endif
