// Where encode and store_rows write a row's pieces: the CPU row (rows mode) or a page store's
// planes at a slot. Host-callable, so that a test checks that the planes the kernels write are
// the ones decode reads.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels.hpp"

namespace kvsketch::cuda::detail {

// The plane index (page, head, token) of a slot of the page store.
__host__ __device__ inline size_t plane_of(const EncodeTarget& target, int head, int64_t slot) {
  const int64_t page = slot / target.page_tokens, token = slot % target.page_tokens;
  return (static_cast<size_t>(page) * target.kv_heads + head) * target.page_tokens + static_cast<size_t>(token);
}

// Part p of row `row` of head `head`: where its indices, its norm and (tq_prod) its gamma go. A
// CPU row holds each part's indices and norm in turn (tq_prod: indices, signs, norm, gamma); a
// page store's index plane the parts' indices in turn, its norm plane their norms.
__host__ __device__ inline void target_of(const EncodeTarget& target, const PartView& view, int p, int head, size_t row,
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
  const size_t plane = plane_of(target, head, target.slots[row]);
  *indices = target.indices + plane * view.packed_bytes + packed_before;
  *norm = reinterpret_cast<uint8_t*>(target.norms + plane * target.norms_per_token + p);
  *gamma = target.gammas ? reinterpret_cast<uint8_t*>(target.gammas + plane) : nullptr;
}

// A CPU row (as VectorCodec::encode writes it) into the planes at `plane`: its parts' indices and
// norms, and tq_prod's gamma; thread `thread` of `threads` copies its share of the bytes.
__host__ __device__ inline void store_row(const PartView& view, const uint8_t* source, size_t plane,
                                          const EncodeTarget& target, int thread, int threads) {
  int from = 0, to = 0;
  for (int p = 0; p < view.part_count; ++p) {
    const int packed = view.part_count == 1 ? view.packed_bytes : view.parts[p].packed_bytes;
    for (int b = thread; b < packed; b += threads) target.indices[plane * view.packed_bytes + to + b] = source[from + b];
    if (thread == 0)
      target.norms[plane * target.norms_per_token + p] =
          static_cast<uint16_t>(source[from + packed] | source[from + packed + 1] << 8);
    from += packed + 2;
    to += packed;
  }
  if (thread == 0 && target.gammas) target.gammas[plane] = static_cast<uint16_t>(source[from] | source[from + 1] << 8);
}

}  // namespace kvsketch::cuda::detail
