// The randomized Hadamard rotation applied by one warp to a vector in shared memory, in the CPU's
// order of float operations (simd/reference_kernels.cpp): products and sums rounded one at a time
// (__fmul_rn, __fadd_rn: nvcc would otherwise fuse them), the transform's stages from half = 1 up.
// That order is what makes GPU codes the CPU's bits.
#pragma once
#include <cuda_runtime.h>

#include "cuda/kernels.hpp"

namespace kvsketch::cuda::detail {

constexpr unsigned kFullMask = 0xffffffffu;

// The unnormalized Walsh-Hadamard transform of data[0, n) (n a power of two).
__device__ inline void warp_fwht(float* data, int n, int lane) {
  for (int half = 1; half < n; half *= 2) {
    for (int k = lane; k < n / 2; k += 32) {
      const int i = (k / half) * 2 * half + k % half;
      const float a = data[i], b = data[i + half];
      data[i] = __fadd_rn(a, b);
      data[i + half] = __fsub_rn(a, b);
    }
    __syncwarp();
  }
}

// data = Pi (data * scale), as RandomizedHadamard::apply_scaled.
__device__ inline void warp_rotate_scaled(const RotationView& rotation, int head, float scale, float* data, int lane) {
  const int window = rotation.window, dim = rotation.dim;
  const float* factors = rotation.factors + static_cast<size_t>(head) * rotation.steps * window;
  const int first = rotation.offsets[0];
  for (int j = lane; j < dim; j += 32) {
    if (j >= first && j < first + window)
      data[j] = __fmul_rn(__fmul_rn(data[j], scale), factors[j - first]);
    else
      data[j] = __fmul_rn(data[j], scale);
  }
  __syncwarp();
  warp_fwht(data + first, window, lane);
  for (int s = 1; s < rotation.steps; ++s) {
    const int offset = rotation.offsets[s];
    for (int j = lane; j < window; j += 32) data[offset + j] = __fmul_rn(data[offset + j], factors[s * window + j]);
    __syncwarp();
    warp_fwht(data + offset, window, lane);
  }
  if (rotation.flips) {
    const float* flips = rotation.flips + static_cast<size_t>(head) * dim;
    for (int j = lane; j < dim; j += 32) data[j] = __fmul_rn(data[j], flips[j]);
    __syncwarp();
  }
}

// data = Pi^T data, as RandomizedHadamard::apply_transpose.
__device__ inline void warp_rotate_transpose(const RotationView& rotation, int head, float* data, int lane) {
  const int window = rotation.window, dim = rotation.dim;
  const float* factors = rotation.factors + static_cast<size_t>(head) * rotation.steps * window;
  if (rotation.flips) {
    const float* flips = rotation.flips + static_cast<size_t>(head) * dim;
    for (int j = lane; j < dim; j += 32) data[j] = __fmul_rn(data[j], flips[j]);
    __syncwarp();
  }
  for (int s = rotation.steps - 1; s >= 0; --s) {
    const int offset = rotation.offsets[s];
    warp_fwht(data + offset, window, lane);
    for (int j = lane; j < window; j += 32) data[offset + j] = __fmul_rn(data[offset + j], factors[s * window + j]);
    __syncwarp();
  }
}

// sum_i x[i] * y[i] in the CPU's fixed order: 64 partial sums (partial[i % 64] in increasing i),
// then halved pairwise (partial[i] += partial[i + width], width 32 down to 1). Every lane returns
// the sum.
__device__ inline float warp_fixed_order_dot(const float* x, const float* y, int n, int lane) {
  float low = 0.0f, high = 0.0f;  // partials lane and lane + 32
  for (int i = lane; i < n; i += 64) low = __fadd_rn(low, __fmul_rn(x[i], y[i]));
  for (int i = lane + 32; i < n; i += 64) high = __fadd_rn(high, __fmul_rn(x[i], y[i]));
  float sum = __fadd_rn(low, high);
  for (int width = 16; width >= 1; width /= 2) sum = __fadd_rn(sum, __shfl_down_sync(kFullMask, sum, width));
  return __shfl_sync(kFullMask, sum, 0);
}

}  // namespace kvsketch::cuda::detail
