#include "codec/sign_code_stage.hpp"

#include <cstring>

#include "core/kernel_memory.hpp"
#include "simd/int_index_kernels.hpp"
#include "simd/kernels.hpp"
#include "simd/table_sums.hpp"

namespace kvsketch {

SignCodeStage::SignCodeStage(const Sketch& sketch) : sketch_(sketch) {}

void SignCodeStage::encode(const float* x, uint8_t* packed, float* projection) const {
  sketch_.project_signs_only(x, projection);
  simd::sign_bits(projection, rows(), packed);
}

void SignCodeStage::build_tables(const float* query, std::vector<float>& tables) const {
  std::vector<float> projected(rows());
  sketch_.project(query, projected.data());
  tables_from_projection(projected.data(), tables);
}

void SignCodeStage::tables_from_projection(const float* projected, std::vector<float>& tables) const {
  tables.resize(bytes() * 256);
  simd::build_sign_byte_tables(projected, rows(), tables.data());
}

simd::RowSource SignCodeStage::sign_rows(const uint8_t* codes, size_t stride, size_t readable) const {
  return {simd::RowFormat::kSign, codes, stride, rows(), 0, nullptr, readable};
}

simd::RowSource SignCodeStage::index_rows(const uint8_t* codes, size_t stride, size_t readable) const {
  static const float kSigns[2] = {-1.0f, 1.0f};  // bit 0 is -1, bit 1 is +1
  return {simd::RowFormat::kIndex, codes, stride, rows(), 1, kSigns, readable};
}

void SignCodeStage::scores(const float* tables, const uint8_t* codes, size_t stride, size_t n, float* out) const {
  simd::byte_table_sums(tables, bytes(), codes, stride, n, out);
}

void SignCodeStage::multi_scores(const Rows& rows, size_t n, const float* projected, size_t heads, float scale,
                                 float* out, size_t out_stride, Arithmetic arithmetic) const {
  if (arithmetic == Arithmetic::kInteger) {
    const simd::RowFactor norms{rows.norm_offset, rows.norm == NormPrecision::kFp16};
    simd::int_index_scores(index_rows(rows.codes, rows.stride, rows.readable), n, projected, heads, scale, out,
                           out_stride, &norms);
    return;
  }
  simd::row_scores(sign_rows(rows.codes, rows.stride, rows.readable), n, projected, heads, 1.0f, out, out_stride);
  KernelVector<float> norms(n);
  load_norms(rows.norm, rows.codes + rows.norm_offset, rows.stride, n, norms.data());
  for (size_t h = 0; h < heads; ++h)
    for (size_t i = 0; i < n; ++i) out[h * out_stride + i] *= scale * norms[i];
}

void SignCodeStage::multi_weighted_sum(const Rows& rows, size_t n, const float* weights, size_t heads,
                                       size_t weight_stride, float* acc, size_t acc_stride,
                                       Arithmetic arithmetic) const {
  if (arithmetic == Arithmetic::kInteger)
    simd::int_index_weighted_sum(index_rows(rows.codes, rows.stride, rows.readable), n, weights, heads,
                                 weight_stride, acc, acc_stride);
  else
    simd::row_weighted_sum(sign_rows(rows.codes, rows.stride, rows.readable), n, weights, heads, weight_stride, acc,
                           acc_stride);
}

}  // namespace kvsketch
