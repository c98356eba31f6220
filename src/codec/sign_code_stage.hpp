// QJL's 1-bit stage: the signs of a random projection S x, packed LSB-first (bit 1 = positive,
// a zero projection counts as negative, as in the QJL authors' code). Queries are projected in
// full precision (the asymmetric estimator): <S q, sign(S x)> through byte tables.
#pragma once
#include <cstdint>
#include <vector>

#include "codec/norm_storage.hpp"
#include "kvsketch/codec.hpp"
#include "kvsketch/transform.hpp"
#include "simd/row_kernels.hpp"

namespace kvsketch {

class SignCodeStage {
 public:
  explicit SignCodeStage(const Sketch& sketch);
  size_t rows() const { return sketch_.rows(); }
  size_t bytes() const { return (sketch_.rows() + 7) / 8; }
  const Sketch& sketch() const { return sketch_; }

  // packed <- sign bits of S x. `projection` holds rows() floats of scratch.
  void encode(const float* x, uint8_t* packed, float* projection) const;
  // out (dim floats) += S^T accumulator
  void finish(const float* accumulator, float* out) const { sketch_.project_transpose_add(accumulator, out); }

  // tables for <S q, signs>; scores(...)[i] = <S q, +-1 of code i>.
  void build_tables(const float* query, std::vector<float>& tables) const;
  // The same tables from the projection S q (rows() floats).
  void tables_from_projection(const float* projected, std::vector<float>& tables) const;

  // The signs of rows starting at `codes` (`stride` apart, `readable` bytes readable from each
  // row's signs), for the multi-query kernels: as sign rows (row_kernels.hpp, floats), or as
  // 1-bit indices into {-1, +1} (int_index_kernels.hpp, integers).
  simd::RowSource sign_rows(const uint8_t* codes, size_t stride, size_t readable) const;
  simd::RowSource index_rows(const uint8_t* codes, size_t stride, size_t readable) const;
  void scores(const float* tables, const uint8_t* codes, size_t stride, size_t n, float* out) const;

  // One part's signs in rows of codes, for the GQA group's heads at once: `codes` points at the
  // first row's signs, `norm_offset` is where the part's norm lies relative to them.
  struct Rows {
    const uint8_t* codes;
    size_t stride, readable, norm_offset;
    NormPrecision norm;
  };
  // out[h * out_stride + i] = scale * norm_i * <projected[h], +-1 of row i>. In integers the
  // signs are 1-bit indices into {-1, +1} with the norm as row factor; in floats, sign rows.
  void multi_scores(const Rows& rows, size_t n, const float* projected, size_t heads, float scale, float* out,
                    size_t out_stride, Arithmetic arithmetic) const;
  // acc[h * acc_stride + t] += sum_i weights[h * weight_stride + i] * (+-1 of row i, sign t).
  void multi_weighted_sum(const Rows& rows, size_t n, const float* weights, size_t heads, size_t weight_stride,
                          float* acc, size_t acc_stride, Arithmetic arithmetic) const;

 private:
  const Sketch& sketch_;
};

}  // namespace kvsketch
