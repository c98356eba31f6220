// One row's TurboQuant encode by one warp: the norm, the rotation of the unit vector, the
// Lloyd-Max indices, their packing and the fp16 norm, and for tq_prod the residual's norm and the
// signs of its sketch, each in the CPU codec's order of operations (codec/turboquant.cpp), so that
// the codes are its bits. Host-callable (the lanes then run one
// after another), so a test compares it with the CPU codecs without a GPU.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstring>

#include "cuda/kernels.hpp"
#include "cuda/warp_rotation.cuh"

namespace kvsketch::cuda::detail {

constexpr int kEncodeMaxDim = 256;
constexpr float kEncodeHalfMax = 65504.0f;

// Shared memory of one warp's encode.
struct EncodeScratch {
  float unit[kEncodeMaxDim];
  float residual[kEncodeMaxDim];
  float partials[64];
  int flag;
};

// Why a row cannot be encoded (launch_encode's reasons).
enum EncodeFailure : int { kEncoded = -1, kBadSlot = 0, kNotFinite = 1, kBeyondFloat = 2, kBeyondHalf = 3 };

__host__ __device__ inline int quantize_index(float value, const CodebookView& codebook) {
  const int count = (1 << codebook.bits) - 1;
  int index = 0;
  for (int k = 0; k < count; ++k) index += value > codebook.boundaries[k];
  return index;
}

__host__ __device__ inline float sqrt_rn(float x) {
#ifdef __CUDA_ARCH__
  return __fsqrt_rn(x);
#else
  return std::sqrt(x);
#endif
}

__host__ __device__ inline uint16_t half_bits_rn(float x) {
  const __half half = __float2half_rn(x);
  uint16_t bits;
  memcpy(&bits, &half, sizeof bits);
  return bits;
}

__host__ __device__ inline void store_half(float value, uint8_t* bytes) {
  const uint16_t half = half_bits_rn(value);
  bytes[0] = static_cast<uint8_t>(half);
  bytes[1] = static_cast<uint8_t>(half >> 8);
}

// Channel c of a head's row as its codec encodes it: center: takes the mean off first (one
// rounding, as CenteredCodec does).
__host__ __device__ inline float centred_input(const PartView& view, int head, const float* in, int c) {
  return view.mean ? sub_rn(in[c], view.mean[static_cast<size_t>(head) * view.dim + c]) : in[c];
}

// Sign bits of data[0, dim) (bit 1 where positive; zero counts as negative), LSB first, as
// simd::sign_bits packs them.
__host__ __device__ inline void pack_signs(const float* data, int dim, uint8_t* out, int lane) {
  for_lanes(lane, [&](int l) {
    for (int p = l; p < dim / 8; p += kWarpSize) {
      unsigned byte = 0;
      for (int k = 0; k < 8; ++k) byte |= static_cast<unsigned>(data[8 * p + k] > 0.0f) << k;
      out[p] = static_cast<uint8_t>(byte);
    }
  });
}

// QJL (m = dim, no outliers): the signs of S x and the fp16 norm, as Qjl::encode_rows; the dense
// sketch's rows summed over the columns in order, one product and one sum at a time
// (simd::matvec_columns), the Hadamard one's block unscaled (Sketch::project_signs_only).
__host__ __device__ inline int encode_signs_row(const PartView& part, int head, const float* in, EncodeScratch& scratch,
                                                uint8_t* signs, uint8_t* norm_bytes, int lane) {
  const int dim = part.dim;
  float* x = scratch.unit;
  float* projection = scratch.residual;
  for_lanes(lane, [&](int l) {
    if (l == 0) scratch.flag = 0;
  });
  for_lanes(lane, [&](int l) {
    for (int j = l; j < dim; j += kWarpSize) {
      x[j] = centred_input(part, head, in, j);
      if (!isfinite(x[j])) scratch.flag = 1;
    }
  });
  if (scratch.flag) return kNotFinite;
  const float norm = sqrt_rn(warp_fixed_order_dot(x, x, dim, scratch.partials, lane));
  if (!(norm <= kEncodeHalfMax)) return kBeyondHalf;
  if (part.sketch_matrix) {
    const float* matrix = part.sketch_matrix + static_cast<size_t>(head) * dim * dim;
    for_lanes(lane, [&](int l) {
      for (int r = l; r < dim; r += kWarpSize) {
        float sum = 0.0f;
        for (int c = 0; c < dim; ++c) sum = add_rn(sum, mul_rn(matrix[c * dim + r], x[c]));
        projection[r] = sum;
      }
    });
  } else {
    for_lanes(lane, [&](int l) {
      for (int j = l; j < dim; j += kWarpSize) projection[j] = x[j];
    });
    warp_rotate_scaled(part.sketch, head, 1.0f, projection, lane);
  }
  pack_signs(projection, dim, signs, lane);
  for_lanes(lane, [&](int l) {
    if (l == 0) store_half(norm, norm_bytes);
  });
  return kEncoded;
}

// Encodes part p of `in` (the head's floats; a split's part takes its channels, the rest the
// first dim) of head `head` into packed indices (tq_prod: then the signs) and the 2-byte norm
// (tq_prod: and the 2-byte gamma at gamma_bytes); returns kEncoded or the failure. Writes nothing
// for a failed row.
__host__ __device__ inline int encode_row(const PartView& view, int p, int head, const float* in, EncodeScratch& scratch,
                                          uint8_t* indices, uint8_t* norm_bytes, uint8_t* gamma_bytes, int lane) {
  if (view.parts[0].codebook.bits == 0) return encode_signs_row(view, head, in, scratch, indices, norm_bytes, lane);
  const ScalarPart& part = view.parts[p];
  const int dim = part.rotation.dim, bits = part.codebook.bits;
  const int scalar_bytes = dim * bits / 8;
  const bool signs = view.signs;
  const uint16_t* gather =
      view.channels ? view.channels + static_cast<size_t>(head) * view.dim + (p == 0 ? 0 : view.parts[0].rotation.dim)
                    : nullptr;
  float* u = scratch.unit;
  for_lanes(lane, [&](int l) {
    if (l == 0) scratch.flag = 0;
  });
  for_lanes(lane, [&](int l) {
    for (int j = l; j < dim; j += kWarpSize) {
      u[j] = centred_input(view, head, in, gather ? gather[j] : j);
      if (!isfinite(u[j])) scratch.flag = 1;
    }
  });
  if (scratch.flag) return kNotFinite;
  const float squares = warp_fixed_order_dot(u, u, dim, scratch.partials, lane);
  float norm;
  if (isfinite(squares)) {
    norm = sqrt_rn(squares);
  } else {  // finite values whose squares overflow: the CPU's sum in double, in its order
    double sum = 0.0;
    for (int j = 0; j < dim; ++j) sum += static_cast<double>(u[j]) * static_cast<double>(u[j]);
    const double wide = sqrt(sum);
    if (wide > FLT_MAX) return kBeyondFloat;
    norm = static_cast<float>(wide);
  }
  if (norm == 0.0f) {  // a zero row: every byte zero, as the CPU writes it
    for_lanes(lane, [&](int l) {
      for (int b = l; b < scalar_bytes + (signs ? dim / 8 : 0); b += kWarpSize) indices[b] = 0;
      if (l < 2) norm_bytes[l] = 0;
      if (signs && l < 2) gamma_bytes[l] = 0;
    });
    return kEncoded;
  }
  warp_rotate_scaled(part.rotation, head, div_rn(1.0f, norm), u, lane);
  float stored = norm, gamma = 0.0f;
  float* residual = scratch.residual;
  if (part.rescale || signs)  // u - u~, the codeword's error
    for_lanes(lane, [&](int l) {
      for (int j = l; j < dim; j += kWarpSize)
        residual[j] = sub_rn(u[j], part.codebook.centroids[quantize_index(u[j], part.codebook)]);
    });
  if (part.rescale) {
    // norm / <u, u~> with <u, u~> = <u, u> - <u, u - u~>, both in the fixed order.
    const float self = warp_fixed_order_dot(u, u, dim, scratch.partials, lane);
    const float off = warp_fixed_order_dot(u, residual, dim, scratch.partials, lane);
    stored = div_rn(norm, sub_rn(self, off));
  }
  if (signs) {
    // gamma = ||u - u~||, then the residual sketched in place (its signs only: unscaled).
    gamma = sqrt_rn(warp_fixed_order_dot(residual, residual, dim, scratch.partials, lane));
    warp_rotate_scaled(view.sketch, head, 1.0f, residual, lane);
  }
  if (!(stored <= kEncodeHalfMax) || !(gamma <= kEncodeHalfMax)) return kBeyondHalf;
  // Eight indices make `bits` bytes, least significant bits first (bitpack.hpp).
  for_lanes(lane, [&](int l) {
    for (int group = l; group < dim / 8; group += kWarpSize) {
      unsigned long long word = 0;
      for (int k = 0; k < 8; ++k)
        word |= static_cast<unsigned long long>(quantize_index(u[group * 8 + k], part.codebook)) << (bits * k);
      for (int b = 0; b < bits; ++b) indices[group * bits + b] = static_cast<uint8_t>(word >> (8 * b));
    }
    if (l == 0) store_half(stored, norm_bytes);
    if (l == 1 && signs) store_half(gamma, gamma_bytes);
  });
  if (signs) pack_signs(residual, dim, indices + scalar_bytes, lane);
  return kEncoded;
}

}  // namespace kvsketch::cuda::detail
