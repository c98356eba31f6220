// Warp-level steps of encode and decode: the randomized Hadamard rotation and the fixed-order dot
// product of a vector in shared memory, in the CPU's order of float operations
// (simd/reference_kernels.cpp): products and sums rounded one at a time (nvcc would otherwise fuse
// them), the transform's stages from half = 1 up, 64 partial sums halved pairwise. That order is
// what makes GPU codes the CPU's bits.
//
// Each step is a series of phases; in a phase every lane touches its own elements, and the warp
// synchronizes between phases. The same functions compile for the host, where a phase runs the
// 32 lanes one after another: a test runs them on the CPU and compares with the CPU codecs.
#pragma once
#include <cuda_runtime.h>

#include <cmath>

#include "cuda/kernels.hpp"

namespace kvsketch::cuda::detail {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarpSize = 32;

// Runs each(lane) for this thread's lane on the device, for all 32 lanes on the host, then
// synchronizes the warp.
template <typename Each>
__host__ __device__ inline void for_lanes(int lane, Each&& each) {
#ifdef __CUDA_ARCH__
  each(lane);
  __syncwarp();
#else
  (void)lane;
  for (int l = 0; l < kWarpSize; ++l) each(l);
#endif
}

__host__ __device__ inline void sync_lanes() {
#ifdef __CUDA_ARCH__
  __syncwarp();
#endif
}

// IEEE single operations rounded one at a time (never fused).
__host__ __device__ inline float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
__host__ __device__ inline float sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
__host__ __device__ inline float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
__host__ __device__ inline float div_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// The unnormalized Walsh-Hadamard transform of data[0, n) (n a power of two).
__host__ __device__ inline void warp_fwht(float* data, int n, int lane) {
  for (int half = 1; half < n; half *= 2)
    for_lanes(lane, [&](int l) {
      for (int k = l; k < n / 2; k += kWarpSize) {
        const int i = (k / half) * 2 * half + k % half;
        const float a = data[i], b = data[i + half];
        data[i] = add_rn(a, b);
        data[i + half] = sub_rn(a, b);
      }
    });
}

// data = Pi (data * scale), as RandomizedHadamard::apply_scaled.
__host__ __device__ inline void warp_rotate_scaled(const RotationView& rotation, int head, float scale, float* data,
                                                   int lane) {
  const int window = rotation.window, dim = rotation.dim;
  const float* factors = rotation.factors + static_cast<size_t>(head) * rotation.steps * window;
  const int first = rotation.offsets[0];
  for_lanes(lane, [&](int l) {
    for (int j = l; j < dim; j += kWarpSize) {
      if (j >= first && j < first + window)
        data[j] = mul_rn(mul_rn(data[j], scale), factors[j - first]);
      else
        data[j] = mul_rn(data[j], scale);
    }
  });
  warp_fwht(data + first, window, lane);
  for (int s = 1; s < rotation.steps; ++s) {
    const int offset = rotation.offsets[s];
    for_lanes(lane, [&](int l) {
      for (int j = l; j < window; j += kWarpSize) data[offset + j] = mul_rn(data[offset + j], factors[s * window + j]);
    });
    warp_fwht(data + offset, window, lane);
  }
  if (rotation.flips) {
    const float* flips = rotation.flips + static_cast<size_t>(head) * dim;
    for_lanes(lane, [&](int l) {
      for (int j = l; j < dim; j += kWarpSize) data[j] = mul_rn(data[j], flips[j]);
    });
  }
}

// data = Pi^T data, as RandomizedHadamard::apply_transpose.
__host__ __device__ inline void warp_rotate_transpose(const RotationView& rotation, int head, float* data, int lane) {
  const int window = rotation.window, dim = rotation.dim;
  const float* factors = rotation.factors + static_cast<size_t>(head) * rotation.steps * window;
  if (rotation.flips) {
    const float* flips = rotation.flips + static_cast<size_t>(head) * dim;
    for_lanes(lane, [&](int l) {
      for (int j = l; j < dim; j += kWarpSize) data[j] = mul_rn(data[j], flips[j]);
    });
  }
  for (int s = rotation.steps - 1; s >= 0; --s) {
    const int offset = rotation.offsets[s];
    warp_fwht(data + offset, window, lane);
    for_lanes(lane, [&](int l) {
      for (int j = l; j < window; j += kWarpSize) data[offset + j] = mul_rn(data[offset + j], factors[s * window + j]);
    });
  }
}

// sum_i x[i] * y[i] in the CPU's fixed order: 64 partial sums (partial[i % 64] in increasing i),
// then halved pairwise (partial[i] += partial[i + width], width 32 down to 1). `partials` holds
// 64 floats of the warp's shared memory; every lane returns the sum.
__host__ __device__ inline float warp_fixed_order_dot(const float* x, const float* y, int n, float* partials,
                                                      int lane) {
  for_lanes(lane, [&](int l) {
    for (int p = l; p < 64; p += kWarpSize) {
      float sum = 0.0f;
      for (int i = p; i < n; i += 64) sum = add_rn(sum, mul_rn(x[i], y[i]));
      partials[p] = sum;
    }
  });
  for (int width = 32; width >= 1; width /= 2)
    for_lanes(lane, [&](int l) {
      if (l < width) partials[l] = add_rn(partials[l], partials[l + width]);
    });
  const float sum = partials[0];
  sync_lanes();  // every lane has read it before the partials are written again
  return sum;
}

}  // namespace kvsketch::cuda::detail
