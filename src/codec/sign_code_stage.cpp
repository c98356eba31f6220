#include "codec/sign_code_stage.hpp"

#include <cstring>

#include "simd/kernels.hpp"
#include "simd/table_sums.hpp"

namespace kvsketch {

SignCodeStage::SignCodeStage(const Sketch& sketch) : sketch_(sketch) {}

void SignCodeStage::encode(const float* x, uint8_t* packed, float* projection) const {
  sketch_.project_signs_only(x, projection);
  simd::sign_bits(projection, rows(), packed);
}

void SignCodeStage::signs_add(const uint8_t* packed, float weight, float* accumulator) const {
  const size_t m = rows();
  for (size_t t = 0; t < m; ++t) accumulator[t] += ((packed[t >> 3] >> (t & 7)) & 1) ? weight : -weight;
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

}  // namespace kvsketch
