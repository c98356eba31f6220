// The MSE stage of TurboQuant: each coordinate of a rotated unit vector replaced by the index of
// its nearest Lloyd-Max centroid, packed at b bits (b = 0 stores nothing and reconstructs 0).
#pragma once
#include <cstdint>
#include <vector>

#include "kvsketch/codebook.hpp"
#include "simd/quantizer_grid.hpp"

namespace kvsketch {

class ScalarCodeStage {
 public:
  ScalarCodeStage(size_t dim, int bits, CoordinateLaw law);
  int bits() const { return bits_; }
  size_t bytes() const { return bytes_; }
  const Codebook& codebook() const { return *codebook_; }

  // Quantizes `rotated` (dim floats); writes packed indices and, if `residual` is non-null,
  // rotated minus the centroid values. `scratch` holds dim bytes.
  void encode(const float* rotated, uint8_t* packed, float* residual, uint8_t* scratch) const;
  // <rotated, its decoded codeword> from encode's residual: <u, u> - <u, u - u~>, in a fixed order
  // (the same bits on every machine). Positive for u != 0: each centroid has its coordinates' sign.
  float codeword_inner_product(const float* rotated, const float* residual) const;
  // encode without a residual, returning codeword_inner_product: the same codes and bits in one
  // pass less.
  float encode_codeword_product(const float* rotated, uint8_t* packed, uint8_t* scratch) const;
  // out[j] = centroid of index j.
  void decode(const uint8_t* packed, float* out) const;
  // accumulator[j] += weight * centroid of index j.
  void decode_add(const uint8_t* packed, float weight, float* accumulator) const;

  // Tables for scoring a rotated query (byte tables for b = 1, 2, 4, 8; the query itself for the
  // other widths); then scores(...)[i] = <query, centroids of code i>.
  void build_tables(const float* rotated_query, std::vector<float>& tables) const;
  void scores(const float* tables, const uint8_t* codes, size_t stride, size_t n, float* out) const;

 private:
  bool byte_tables() const { return bits_ == 1 || bits_ == 2 || bits_ == 4 || bits_ == 8; }
  // indices[j] = the index of rotated[j] (dim bytes): by the grid where it serves.
  void quantize(const float* rotated, uint8_t* indices) const;
  size_t dim_;
  int bits_;
  size_t bytes_;
  const Codebook* codebook_;
  std::vector<float> byte_decode_;  // byte value -> 8/b centroids (byte-aligned widths)
  simd::QuantizerGrid grid_;        // the boundaries on a uniform grid (b = 3, 4)
};

}  // namespace kvsketch
