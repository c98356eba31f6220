#include "codec/scalar_code_stage.hpp"

#include <algorithm>

#include "kvsketch/bitpack.hpp"
#include "simd/kernels.hpp"
#include "simd/quantizer_grid.hpp"
#include "simd/row_kernels.hpp"
#include "simd/table_sums.hpp"

namespace kvsketch {

ScalarCodeStage::ScalarCodeStage(size_t dim, int bits, CoordinateLaw law)
    : dim_(dim), bits_(bits), bytes_(packed_bytes(dim, bits)), codebook_(&lloyd_max_codebook(law, dim, bits)) {
  if (bits_ > 0 && byte_tables()) {
    const size_t per_byte = 8 / bits_;
    const unsigned mask = (1u << bits_) - 1u;
    byte_decode_.resize(256 * per_byte);
    for (unsigned v = 0; v < 256; ++v)
      for (size_t f = 0; f < per_byte; ++f)
        byte_decode_[v * per_byte + f] = codebook_->centroids[(v >> (f * bits_)) & mask];
  }
  if (bits_ > 0) grid_ = simd::make_quantizer_grid(codebook_->boundaries.data(), bits_);
}

void ScalarCodeStage::quantize(const float* rotated, uint8_t* indices) const {
  simd::quantize(rotated, dim_, codebook_->boundaries.data(), bits_, indices, &grid_);
}

void ScalarCodeStage::encode(const float* rotated, uint8_t* packed, float* residual, uint8_t* scratch) const {
  if (bits_ == 0) {
    if (residual) std::copy(rotated, rotated + dim_, residual);
    return;
  }
  quantize(rotated, scratch);
  pack_bits(scratch, dim_, bits_, packed);
  if (residual)
    simd::subtract_table(rotated, scratch, dim_, codebook_->centroids.data(), codebook_->centroids.size(), residual);
}

float ScalarCodeStage::encode_codeword_product(const float* rotated, uint8_t* packed, uint8_t* scratch) const {
  if (bits_ == 0) return 0.0f;
  return simd::quantize_pack_dot(rotated, dim_, codebook_->boundaries.data(), bits_, &grid_,
                                 codebook_->centroids.data(), codebook_->centroids.size(), packed, scratch);
}

float ScalarCodeStage::codeword_inner_product(const float* rotated, const float* residual) const {
  return simd::sum_of_squares(rotated, dim_) - simd::fixed_order_dot(rotated, residual, dim_);
}

void ScalarCodeStage::decode(const uint8_t* packed, float* out) const {
  std::fill(out, out + dim_, 0.0f);
  decode_add(packed, 1.0f, out);
}

void ScalarCodeStage::decode_add(const uint8_t* packed, float weight, float* accumulator) const {
  if (bits_ == 0) return;
  if (byte_tables()) {
    const size_t per_byte = 8 / bits_;
    const size_t full = dim_ / per_byte;
    for (size_t p = 0; p < full; ++p) {
      const float* centroids = byte_decode_.data() + packed[p] * per_byte;
      float* target = accumulator + p * per_byte;
      for (size_t f = 0; f < per_byte; ++f) target[f] += weight * centroids[f];
    }
    for (size_t j = full * per_byte; j < dim_; ++j)
      accumulator[j] += weight * byte_decode_[packed[j / per_byte] * per_byte + j % per_byte];
    return;
  }
  uint8_t indices[8192];
  unpack_bits(packed, dim_, bits_, indices);
  for (size_t j = 0; j < dim_; ++j) accumulator[j] += weight * codebook_->centroids[indices[j]];
}

void ScalarCodeStage::build_tables(const float* rotated_query, std::vector<float>& tables) const {
  if (bits_ == 0) {
    tables.clear();
    return;
  }
  if (byte_tables()) {
    tables.resize(bytes_ * 256);
    simd::build_value_byte_tables(rotated_query, dim_, codebook_->centroids.data(), bits_, tables.data());
    return;
  }
  tables.assign(rotated_query, rotated_query + dim_);  // odd widths: the row kernel takes the query itself
}

void ScalarCodeStage::scores(const float* tables, const uint8_t* codes, size_t stride, size_t n, float* out) const {
  if (bits_ == 0) {
    std::fill(out, out + n, 0.0f);
    return;
  }
  if (byte_tables()) {
    simd::byte_table_sums(tables, bytes_, codes, stride, n, out);
    return;
  }
  // Indices that straddle bytes (b = 3, 5, 6, 7): unpacked in registers by the row kernel, about
  // seven times the speed of unpacking them one at a time and summing a table per coordinate.
  const simd::RowSource rows{simd::RowFormat::kIndex, codes, stride, dim_, bits_, codebook_->centroids.data(), bytes_};
  simd::row_scores(rows, n, tables, 1, 1.0f, out, n);
}

}  // namespace kvsketch
