// TurboQuant_mse encode on the device, one warp per row: the norm, the rotation of the unit
// vector, the Lloyd-Max indices, their packing and the fp16 norm, each in the CPU codec's order of
// operations (codec/turboquant.cpp), so the codes are its bits.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cfloat>

#include "cuda/kernels.hpp"
#include "cuda/warp_rotation.cuh"

namespace kvsketch::cuda::detail {
namespace {

constexpr int kEncodeWarps = 4;
constexpr int kMaxDim = 256;
constexpr float kHalfMax = 65504.0f;

__device__ inline int quantize(float value, const CodebookView& codebook) {
  const int count = (1 << codebook.bits) - 1;
  int index = 0;
  for (int k = 0; k < count; ++k) index += value > codebook.boundaries[k];
  return index;
}

__device__ inline void report(unsigned long long* failure, size_t row, int reason) {
  atomicMin(failure, static_cast<unsigned long long>(row) * 4 + reason);
}

// Row `row` of head `head`: where its indices and its norm go.
__device__ inline void target_of(const EncodeTarget& target, const PartView& part, int head, size_t row,
                                 uint8_t** indices, uint8_t** norm) {
  if (target.rows) {
    *indices = target.rows + row * target.row_stride;
    *norm = *indices + part.packed_bytes;
    return;
  }
  const int64_t slot = target.slots[row];
  const int64_t page = slot / target.page_tokens, token = slot % target.page_tokens;
  const size_t plane = (static_cast<size_t>(page) * target.kv_heads + head) * target.page_tokens + token;
  *indices = target.indices + plane * part.packed_bytes;
  *norm = reinterpret_cast<uint8_t*>(target.norms + plane);
}

__global__ void encode_kernel(PartView part, int first_head, const float* x, size_t row_stride, size_t head_stride,
                              size_t n, EncodeTarget target, unsigned long long* failure) {
  __shared__ float buffers[kEncodeWarps][kMaxDim];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const size_t row = static_cast<size_t>(blockIdx.x) * kEncodeWarps + warp;
  const int head = first_head + static_cast<int>(blockIdx.y);
  if (row >= n) return;
  const int dim = part.rotation.dim, bits = part.codebook.bits;
  float* u = buffers[warp];
  const float* in = x + row * row_stride + head * head_stride;
  bool finite = true;
  for (int j = lane; j < dim; j += 32) {
    u[j] = in[j];
    finite = finite && isfinite(u[j]);
  }
  __syncwarp();
  finite = __all_sync(kFullMask, finite);
  if (!target.rows && (target.slots[row] < 0 || target.slots[row] >= target.total_slots)) {
    if (lane == 0) report(failure, row, 0);
    return;
  }
  uint8_t *indices, *norm_bytes;
  target_of(target, part, head, row, &indices, &norm_bytes);
  if (!finite) {
    if (lane == 0) report(failure, row, 1);
    return;
  }
  const float squares = warp_fixed_order_dot(u, u, dim, lane);
  float norm;
  if (isfinite(squares)) {
    norm = __fsqrt_rn(squares);
  } else {  // finite values whose squares overflow: the CPU's double sum, in its order
    double sum = 0.0;
    for (int j = 0; j < dim; ++j) sum = __dadd_rn(sum, __dmul_rn(u[j], u[j]));
    const double wide = sqrt(sum);
    if (wide > FLT_MAX) {
      if (lane == 0) report(failure, row, 2);
      return;
    }
    norm = static_cast<float>(wide);
  }
  const int packed = part.packed_bytes;
  if (norm == 0.0f) {  // a zero row: every byte zero, as the CPU writes it
    for (int b = lane; b < packed + 2; b += 32) (b < packed ? indices[b] : norm_bytes[b - packed]) = 0;
    return;
  }
  warp_rotate_scaled(part.rotation, head, __fdiv_rn(1.0f, norm), u, lane);
  float stored = norm;
  if (part.rescale) {
    // norm / <u, u~> with <u, u~> = <u, u> - <u, u - u~>, both in the fixed order.
    __shared__ float residuals[kEncodeWarps][kMaxDim];
    float* residual = residuals[warp];
    for (int j = lane; j < dim; j += 32) residual[j] = __fsub_rn(u[j], part.codebook.centroids[quantize(u[j], part.codebook)]);
    __syncwarp();
    const float product = __fsub_rn(warp_fixed_order_dot(u, u, dim, lane), warp_fixed_order_dot(u, residual, dim, lane));
    stored = __fdiv_rn(norm, product);
  }
  if (!(stored <= kHalfMax)) {
    if (lane == 0) report(failure, row, 3);
    return;
  }
  // Eight indices make `bits` bytes, least significant bits first (bitpack.hpp).
  for (int group = lane; group < dim / 8; group += 32) {
    unsigned long long word = 0;
    for (int k = 0; k < 8; ++k)
      word |= static_cast<unsigned long long>(quantize(u[group * 8 + k], part.codebook)) << (bits * k);
    for (int b = 0; b < bits; ++b) indices[group * bits + b] = static_cast<uint8_t>(word >> (8 * b));
  }
  if (lane == 0) {
    const unsigned short half = __half_as_ushort(__float2half_rn(stored));
    norm_bytes[0] = static_cast<uint8_t>(half);
    norm_bytes[1] = static_cast<uint8_t>(half >> 8);
  }
}

__global__ void store_rows_kernel(const uint8_t* rows, size_t row_bytes, int packed_bytes, int head, size_t n,
                                  EncodeTarget target, unsigned long long* failure) {
  const size_t row = blockIdx.x;
  if (row >= n) return;
  const int64_t slot = target.slots[row];
  if (slot < 0 || slot >= target.total_slots) {
    if (threadIdx.x == 0) report(failure, row, 0);
    return;
  }
  const int page_tokens = target.page_tokens;
  const size_t plane = (static_cast<size_t>(slot / page_tokens) * target.kv_heads + head) * page_tokens +
                       static_cast<size_t>(slot % page_tokens);
  const uint8_t* source = rows + row * row_bytes;
  for (int b = threadIdx.x; b < packed_bytes; b += blockDim.x) target.indices[plane * packed_bytes + b] = source[b];
  if (threadIdx.x == 0)
    target.norms[plane] = static_cast<uint16_t>(source[packed_bytes] | source[packed_bytes + 1] << 8);
}

}  // namespace

int launch_encode(const PartView& part, int first_head, int heads, const float* x, size_t row_stride,
                  size_t head_stride, size_t n, const EncodeTarget& target, unsigned long long* failure,
                  void* stream) {
  if (n == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>((n + kEncodeWarps - 1) / kEncodeWarps), static_cast<unsigned>(heads));
  encode_kernel<<<grid, kEncodeWarps * 32, 0, static_cast<cudaStream_t>(stream)>>>(part, first_head, x, row_stride,
                                                                                   head_stride, n, target, failure);
  return cudaGetLastError();
}

int launch_store_rows(const uint8_t* rows, size_t row_bytes, int packed_bytes, int head, size_t n,
                      const EncodeTarget& target, unsigned long long* failure, void* stream) {
  if (n == 0) return cudaSuccess;
  store_rows_kernel<<<static_cast<unsigned>(n), 64, 0, static_cast<cudaStream_t>(stream)>>>(
      rows, row_bytes, packed_bytes, head, n, target, failure);
  return cudaGetLastError();
}

}  // namespace kvsketch::cuda::detail
