// QJL's 1-bit stage: the signs of a random projection S x, packed LSB-first (bit 1 = positive,
// a zero projection counts as negative, as in the QJL authors' code). Queries are projected in
// full precision (the asymmetric estimator): <S q, sign(S x)> through byte tables.
#pragma once
#include <cstdint>
#include <vector>

#include "kvsketch/transform.hpp"

namespace kvsketch {

class SignCodeStage {
 public:
  explicit SignCodeStage(const Sketch& sketch);
  size_t rows() const { return sketch_.rows(); }
  size_t bytes() const { return (sketch_.rows() + 7) / 8; }
  const Sketch& sketch() const { return sketch_; }

  // packed <- sign bits of S x. `projection` holds rows() floats of scratch.
  void encode(const float* x, uint8_t* packed, float* projection) const;
  // accumulator (rows() floats) += weight * (+-1 per sign bit)
  void signs_add(const uint8_t* packed, float weight, float* accumulator) const;
  // out (dim floats) += S^T accumulator
  void finish(const float* accumulator, float* out) const { sketch_.project_transpose_add(accumulator, out); }

  // tables for <S q, signs>; scores(...)[i] = <S q, +-1 of code i>.
  void build_tables(const float* query, std::vector<float>& tables) const;
  void scores(const float* tables, const uint8_t* codes, size_t stride, size_t n, float* out) const;

 private:
  const Sketch& sketch_;
};

}  // namespace kvsketch
