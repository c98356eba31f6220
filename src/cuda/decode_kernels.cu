// Fused decode attention over a paged block store on the device: the kernels of decode_body.cuh
// on the GPU's context, the split of the tokens over thread blocks, and the launchers.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "cuda/decode_body.cuh"
#include "cuda/kernels.hpp"

namespace kvsketch::cuda::detail {
namespace {

// The GPU: the grid's indices, the hardware's barriers, shuffles and mma.m16n8k16.
struct DeviceContext {
  static constexpr bool kLanesApart = false;
  __device__ int thread() const { return threadIdx.x; }
  __device__ int block_x() const { return blockIdx.x; }
  __device__ int block_y() const { return blockIdx.y; }
  __device__ int block_z() const { return blockIdx.z; }
  __device__ void sync_block() const { __syncthreads(); }
  __device__ void sync_warp() const { __syncwarp(); }
  __device__ float shfl_xor(float value, int mask) const { return __shfl_xor_sync(kFullMask, value, mask); }
  __device__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) const {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

template <int D, int KB, int VB, bool SIGNS>
__global__ void __launch_bounds__(kThreads)
    decode_body_kernel(const __grid_constant__ DecodeShape shape, const __grid_constant__ BodyView body,
                       const __grid_constant__ BatchView batch, const float* queries, float* partials,
                       int tokens_per_unit, int units) {
  __shared__ float shared[decode_body_shared_floats<D, SIGNS>()];
  DeviceContext ctx;
  decode_body<D, KB, VB, SIGNS>(ctx, shared, shape, body, batch, queries, partials, tokens_per_unit, units);
}

template <int D>
__global__ void __launch_bounds__(kThreads)
    finish_kernel(const __grid_constant__ DecodeShape shape, const __grid_constant__ BodyView body,
                  const __grid_constant__ BatchView batch, const float* queries, const float* partials, int units,
                  float* output, float* lse) {
  __shared__ FinishShared<D> shared;
  DeviceContext ctx;
  finish<D>(ctx, shared, shape, body, batch, queries, partials, units, output, lse);
}

template <int D, int KB, int VB, bool SIGNS>
int launch_body(const DecodeShape& shape, const BodyView& body, const BatchView& batch, const float* queries,
                float* partials, const Split& split, cudaStream_t stream) {
  const dim3 grid(split.units, shape.kv_heads, batch.batch);
  decode_body_kernel<D, KB, VB, SIGNS><<<grid, kThreads, 0, stream>>>(shape, body, batch, queries, partials,
                                                                  split.tokens_per_unit, split.units);
  return cudaGetLastError();
}

template <int D>
int launch_for_dim(const DecodeShape& shape, const BodyView& body, const BatchView& batch, const float* queries,
                   float* output, float* lse, float* workspace, cudaStream_t stream) {
  const Split split = split_of(shape, batch);
  float* partials = workspace;
  int status = cudaErrorInvalidValue;
  const int kb = body.key_bits, vb = body.value_bits;
  const bool signs = body.key_signs;
  // The instantiated pairs: fp16/fp16, every pair of 2, 3 and 4 bits, tq_prod keys of 2, 3 and 4
  // bits (scalar parts of 1, 2 and 3) and QJL keys (0) with values of 2, 3 and 4, and the splits.
#define KVSKETCH_BODY(K, V, S)     \
  if (kb == K && vb == V && signs == S) \
    status = launch_body<D, K, V, S>(shape, body, batch, queries, partials, split, stream);
#define KVSKETCH_VALUES(K, S) KVSKETCH_BODY(K, 2, S) KVSKETCH_BODY(K, 3, S) KVSKETCH_BODY(K, 4, S)
  KVSKETCH_BODY(16, 16, false)
  KVSKETCH_VALUES(2, false)
  KVSKETCH_VALUES(3, false)
  KVSKETCH_VALUES(4, false)
  KVSKETCH_VALUES(0, true)
  KVSKETCH_VALUES(1, true)
  KVSKETCH_VALUES(2, true)
  KVSKETCH_VALUES(3, true)
  // The channel splits of tq_mse:b=2.5 and 3.5, as keys and values, with each other.
  if constexpr (D >= 128) {
    KVSKETCH_BODY(kSplit25, kSplit25, false)
    KVSKETCH_BODY(kSplit25, kSplit35, false)
    KVSKETCH_BODY(kSplit35, kSplit25, false)
    KVSKETCH_BODY(kSplit35, kSplit35, false)
  }
#undef KVSKETCH_VALUES
#undef KVSKETCH_BODY
  if (status != cudaSuccess) return status;
  finish_kernel<D><<<dim3(shape.group, shape.kv_heads, batch.batch), kThreads, 0, stream>>>(
      shape, body, batch, queries, partials, split.units, output, lse);
  return cudaGetLastError();
}

}  // namespace

size_t decode_workspace_floats(const DecodeShape& shape, const BatchView& batch) {
  const Split split = split_of(shape, batch);
  const size_t rows = static_cast<size_t>(batch.batch) * shape.kv_heads;
  return rows * split.units * shape.group * (shape.dim + 2);
}

int launch_decode(const DecodeShape& shape, const BodyView& body, const BatchView& batch, const float* queries,
                  float* output, float* lse, float* workspace, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  switch (shape.dim) {
    case 64: return launch_for_dim<64>(shape, body, batch, queries, output, lse, workspace, s);
    case 128: return launch_for_dim<128>(shape, body, batch, queries, output, lse, workspace, s);
    case 256: return launch_for_dim<256>(shape, body, batch, queries, output, lse, workspace, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace kvsketch::cuda::detail
