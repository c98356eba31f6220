// The query of one head as the decode kernel's A fragments take it, staged in shared memory:
// rotated by the keys' rotation and scaled (u), and for tq_prod and QJL keys also sketched as the
// keys were (s = sketch_scale * S u, S the sketch's Hadamard block or dense matrix): the keys' domain of the
// CPU codec, times the softmax's scale. Host-callable (the lanes then run one after another), so
// that a test compares it with the CPU codec's prepared query.
#pragma once
#include <cuda_runtime.h>

#include "cuda/kernels.hpp"
#include "cuda/warp_rotation.cuh"

namespace kvsketch::cuda::detail {

// Centred keys' shift of every body score, <q, mean> times the softmax's scale (0 without a mean).
// The shift is the same for every token, so the body's softmax does not see it: only its merge
// with the exact sinks and window (and the lse) do.
__host__ __device__ inline float query_shift(const BodyView& body, int head, int dim, float scale, const float* q) {
  float sum = 0.0f;
  for (int j = 0; body.key_mean && j < dim; ++j) sum += q[j] * body.key_mean[static_cast<size_t>(head) * dim + j];
  return sum * scale;
}

template <bool SIGNS>
__host__ __device__ inline void stage_query(const BodyView& body, int head, int dim, float scale, const float* q,
                                            float* u, float* s, int lane) {
  // A split's parts: each its channels, rotated by its own rotation.
  const uint16_t* channels = body.key_channels ? body.key_channels + static_cast<size_t>(head) * dim : nullptr;
  for_lanes(lane, [&](int l) {
    for (int j = l; j < dim; j += kWarpSize) u[j] = q[channels ? channels[j] : j];
  });
  if (body.key_rotation.steps > 0) {
    warp_rotate_scaled(body.key_rotation, head, scale, u, lane);
    if (channels) warp_rotate_scaled(body.key_rotation1, head, scale, u + body.key_rotation.dim, lane);
  } else {
    for_lanes(lane, [&](int l) {
      for (int j = l; j < dim; j += kWarpSize) u[j] *= scale;
    });
  }
  if constexpr (SIGNS) {
    if (body.key_sketch_matrix) {
      const float* matrix = body.key_sketch_matrix + static_cast<size_t>(head) * dim * dim;
      for_lanes(lane, [&](int l) {
        for (int r = l; r < dim; r += kWarpSize) {
          float sum = 0.0f;
          for (int c = 0; c < dim; ++c) sum += matrix[c * dim + r] * u[c];
          s[r] = sum * body.sketch_scale;
        }
      });
    } else {
      for_lanes(lane, [&](int l) {
        for (int j = l; j < dim; j += kWarpSize) s[j] = u[j];
      });
      warp_rotate_scaled(body.key_sketch, head, body.sketch_scale, s, lane);
    }
  }
}

}  // namespace kvsketch::cuda::detail
