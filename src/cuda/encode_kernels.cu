// TurboQuant encode (mse and prod) on the device, one warp per row (cuda/encode_row.cuh), into the CPU's
// rows or into the planes of a page store.
#include <cuda_runtime.h>

#include "cuda/encode_row.cuh"
#include "cuda/encode_targets.cuh"
#include "cuda/kernels.hpp"

namespace kvsketch::cuda::detail {
namespace {

constexpr int kEncodeWarps = 4;

__device__ inline void report(unsigned long long* failure, size_t row, int reason) {
  atomicMin(failure, static_cast<unsigned long long>(row) * 4 + reason);
}

__global__ void encode_kernel(PartView view, int first_head, const float* x, size_t row_stride, size_t head_stride,
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
  for (int p = 0; p < view.part_count; ++p) {
    uint8_t *indices, *norm_bytes, *gamma_bytes;
    target_of(target, view, p, head, row, &indices, &norm_bytes, &gamma_bytes);
    const int result = encode_row(view, p, head, x + row * row_stride + head * head_stride, scratch[warp], indices,
                                  norm_bytes, gamma_bytes, lane);
    if (result != kEncoded) {
      if (lane == 0) report(failure, row, result);
      return;
    }
  }
}

__global__ void store_rows_kernel(PartView view, const uint8_t* rows, size_t row_bytes, int head, size_t n,
                                  EncodeTarget target, unsigned long long* failure) {
  const size_t row = blockIdx.x;
  if (row >= n) return;
  const int64_t slot = target.slots[row];
  if (slot < 0 || slot >= target.total_slots) {
    if (threadIdx.x == 0) report(failure, row, kBadSlot);
    return;
  }
  store_row(view, rows + row * row_bytes, plane_of(target, head, slot), target, threadIdx.x, blockDim.x);
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

int launch_store_rows(const PartView& part, const uint8_t* rows, size_t row_bytes, int head, size_t n,
                      const EncodeTarget& target, unsigned long long* failure, void* stream) {
  if (n == 0) return cudaSuccess;
  store_rows_kernel<<<static_cast<unsigned>(n), 64, 0, static_cast<cudaStream_t>(stream)>>>(
      part, rows, row_bytes, head, n, target, failure);
  return cudaGetLastError();
}

}  // namespace kvsketch::cuda::detail
