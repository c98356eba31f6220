// The query of one head as the decode kernel's A fragments take it, staged in shared memory:
// rotated by the keys' rotation and scaled (u), and for tq_prod keys also sketched as the
// residuals were (s = sketch_scale * H u, H the sketch's Hadamard block): the keys' domain of the
// CPU codec, times the softmax's scale. Host-callable (the lanes then run one after another), so
// that a test compares it with the CPU codec's prepared query.
#pragma once
#include <cuda_runtime.h>

#include "cuda/kernels.hpp"
#include "cuda/warp_rotation.cuh"

namespace kvsketch::cuda::detail {

template <bool SIGNS>
__host__ __device__ inline void stage_query(const BodyView& body, int head, int dim, float scale, const float* q,
                                            float* u, float* s, int lane) {
  for_lanes(lane, [&](int l) {
    for (int j = l; j < dim; j += kWarpSize) u[j] = q[j];
  });
  if (body.key_rotation.steps > 0) {
    warp_rotate_scaled(body.key_rotation, head, scale, u, lane);
  } else {
    for_lanes(lane, [&](int l) {
      for (int j = l; j < dim; j += kWarpSize) u[j] *= scale;
    });
  }
  if constexpr (SIGNS) {
    for_lanes(lane, [&](int l) {
      for (int j = l; j < dim; j += kWarpSize) s[j] = u[j];
    });
    warp_rotate_scaled(body.key_sketch, head, body.sketch_scale, s, lane);
  }
}

}  // namespace kvsketch::cuda::detail
