// RefineStore: copies of the stored vectors at fp16 or int8 (one float scale per vector), kept to
// re-score a shortlist exactly, as FAISS's IndexRefine does. A query's similarity to a stored copy
// is computed in a fixed order, so that it is the same bits on every machine.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ann/list_array.hpp"
#include "kvsketch/ivf_index.hpp"

namespace kvsketch {

// "none", "fp16", "int8"; anything else throws Error naming the field.
Refine parse_refine(const std::string& name);
std::string refine_name(Refine refine);

class RefineStore {
 public:
  RefineStore(Refine kind, size_t dim) : kind_(kind), dim_(dim) {}
  Refine kind() const { return kind_; }
  size_t rows() const { return rows_; }
  // fp16: 2 bytes per coordinate; int8: 1 per coordinate and a float scale.
  size_t bytes_per_vector() const;

  void append(const float* rows, size_t n);
  // Keeps the rows whose flag is set, in order.
  void keep(const std::vector<bool>& kept);
  // The stored copy of row as floats (dim).
  void decode(size_t row, float* out) const;
  // <q, x> and ||x||^2 of the stored copy.
  void similarity_terms(const float* q, size_t row, float* scratch, float& dot, float& square) const;

  // Raw storage, for files: the values, then (int8) the scales.
  ListArray<uint16_t>& halves() { return halves_; }
  ListArray<int8_t>& bytes() { return bytes_; }
  ListArray<float>& scales() { return scales_; }
  const ListArray<uint16_t>& halves() const { return halves_; }
  const ListArray<int8_t>& bytes() const { return bytes_; }
  const ListArray<float>& scales() const { return scales_; }
  void set_rows(size_t rows) { rows_ = rows; }
  // The first row whose copy is not finite (only a corrupted file has one), or rows().
  size_t first_non_finite_row() const;

 private:
  Refine kind_;
  size_t dim_, rows_ = 0;
  ListArray<uint16_t> halves_;  // fp16: rows x dim
  ListArray<int8_t> bytes_;     // int8: rows x dim
  ListArray<float> scales_;     // int8: per row, x ~= scale * byte
};

}  // namespace kvsketch
