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

// Part p of row `row` of head `head`: where its indices, its norm and (tq_prod) its gamma go. A
// CPU row holds each part's indices and norm in turn (tq_prod: indices, signs, norm, gamma); a
// page store's index plane the parts' indices in turn, its norm plane their norms.
__device__ inline void target_of(const EncodeTarget& target, const PartView& view, int p, int head, size_t row,
                                 uint8_t** indices, uint8_t** norm, uint8_t** gamma) {
  int packed_before = 0;
  for (int q = 0; q < p; ++q) packed_before += view.parts[q].packed_bytes;
  const int packed = view.part_count == 1 ? view.packed_bytes : view.parts[p].packed_bytes;
  if (target.rows) {
    *indices = target.rows + row * target.row_stride + packed_before + 2 * p;
    *norm = *indices + packed;
    *gamma = *norm + 2;
    return;
  }
  const int64_t slot = target.slots[row];
  const int64_t page = slot / target.page_tokens, token = slot % target.page_tokens;
  const size_t plane = (static_cast<size_t>(page) * target.kv_heads + head) * target.page_tokens + token;
  *indices = target.indices + plane * view.packed_bytes + packed_before;
  *norm = reinterpret_cast<uint8_t*>(target.norms + plane * target.norms_per_token + p);
  *gamma = target.gammas ? reinterpret_cast<uint8_t*>(target.gammas + plane) : nullptr;
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

// One CPU row per block, its parts' indices and norms (and tq_prod's gamma) into the planes.
__global__ void store_rows_kernel(PartView view, const uint8_t* rows, size_t row_bytes, int head, size_t n,
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
  int from = 0, to = 0;
  for (int p = 0; p < view.part_count; ++p) {
    const int packed = view.part_count == 1 ? view.packed_bytes : view.parts[p].packed_bytes;
    for (int b = threadIdx.x; b < packed; b += blockDim.x)
      target.indices[plane * view.packed_bytes + to + b] = source[from + b];
    if (threadIdx.x == 0)
      target.norms[plane * target.norms_per_token + p] =
          static_cast<uint16_t>(source[from + packed] | source[from + packed + 1] << 8);
    from += packed + 2;
    to += packed;
  }
  if (threadIdx.x == 1 && target.gammas)
    target.gammas[plane] = static_cast<uint16_t>(source[from] | source[from + 1] << 8);
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
