// TurboQuant encode (mse and prod) on the device, one warp per row (cuda/encode_row.cuh), into the CPU's
// rows or into the planes of a page store.
#include <cuda_runtime.h>

#include "cuda/encode_row.cuh"
#include "cuda/kernels.hpp"

namespace kvsketch::cuda::detail {
namespace {

constexpr int kEncodeWarps = 4;

__device__ inline void report(unsigned long long* failure, size_t row, int reason) {
  atomicMin(failure, static_cast<unsigned long long>(row) * 4 + reason);
}

// Row `row` of head `head`: where its indices, its norm and (tq_prod) its gamma go.
__device__ inline void target_of(const EncodeTarget& target, const PartView& part, int head, size_t row,
                                 uint8_t** indices, uint8_t** norm, uint8_t** gamma) {
  if (target.rows) {
    *indices = target.rows + row * target.row_stride;
    *norm = *indices + part.packed_bytes;
    *gamma = *norm + 2;
    return;
  }
  const int64_t slot = target.slots[row];
  const int64_t page = slot / target.page_tokens, token = slot % target.page_tokens;
  const size_t plane = (static_cast<size_t>(page) * target.kv_heads + head) * target.page_tokens + token;
  *indices = target.indices + plane * part.packed_bytes;
  *norm = reinterpret_cast<uint8_t*>(target.norms + plane);
  *gamma = target.gammas ? reinterpret_cast<uint8_t*>(target.gammas + plane) : nullptr;
}

__global__ void encode_kernel(PartView part, int first_head, const float* x, size_t row_stride, size_t head_stride,
                              size_t n, EncodeTarget target, unsigned long long* failure) {
  __shared__ EncodeScratch scratch[kEncodeWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const size_t row = static_cast<size_t>(blockIdx.x) * kEncodeWarps + warp;
  const int head = first_head + static_cast<int>(blockIdx.y);
  if (row >= n) return;
  if (!target.rows && (target.slots[row] < 0 || target.slots[row] >= target.total_slots)) {
    if (lane == 0) report(failure, row, kBadSlot);
    return;
  }
  uint8_t *indices, *norm_bytes, *gamma_bytes;
  target_of(target, part, head, row, &indices, &norm_bytes, &gamma_bytes);
  const int result = encode_row(part, head, x + row * row_stride + head * head_stride, scratch[warp], indices,
                                norm_bytes, gamma_bytes, lane);
  if (result != kEncoded && lane == 0) report(failure, row, result);
}

__global__ void store_rows_kernel(const uint8_t* rows, size_t row_bytes, int packed_bytes, int head, size_t n,
                                  EncodeTarget target, unsigned long long* failure) {
  const size_t row = blockIdx.x;
  if (row >= n) return;
  const int64_t slot = target.slots[row];
  if (slot < 0 || slot >= target.total_slots) {
    if (threadIdx.x == 0) report(failure, row, kBadSlot);
    return;
  }
  const int page_tokens = target.page_tokens;
  const size_t plane = (static_cast<size_t>(slot / page_tokens) * target.kv_heads + head) * page_tokens +
                       static_cast<size_t>(slot % page_tokens);
  const uint8_t* source = rows + row * row_bytes;
  for (int b = threadIdx.x; b < packed_bytes; b += blockDim.x) target.indices[plane * packed_bytes + b] = source[b];
  if (threadIdx.x == 0)
    target.norms[plane] = static_cast<uint16_t>(source[packed_bytes] | source[packed_bytes + 1] << 8);
  if (threadIdx.x == 1 && target.gammas)
    target.gammas[plane] = static_cast<uint16_t>(source[packed_bytes + 2] | source[packed_bytes + 3] << 8);
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
