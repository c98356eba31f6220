// y = x W^T + b for a batch of rows, W in PyTorch's [out][in] row-major layout: Eigen's GEMM for
// several rows (prefill), a GEMV parallel over output rows for one (decode).
#pragma once
#include <cstddef>

namespace kvsketch::model {

void linear(const float* x, size_t rows, size_t in, const float* weight, size_t out, const float* bias, float* y);

}  // namespace kvsketch::model
