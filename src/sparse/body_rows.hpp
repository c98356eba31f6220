// Reading one token's key or value from a BodyView, whatever its storage (floats or fp16): the
// scattered-row access of selection attention.
#pragma once
#include <cstddef>
#include <vector>

#include "kvsketch/sparse_attention.hpp"
#include "simd/kernels.hpp"
#include "simd/attention_kernels.hpp"

namespace kvsketch {

// An fp16 row widened into a small buffer (on the stack up to 512 values).
class WideRow {
 public:
  WideRow(const uint16_t* row, size_t dim) {
    if (dim > kStack) heap_.resize(dim);
    data_ = dim > kStack ? heap_.data() : stack_;
    simd::half_to_float_row(row, dim, data_);
  }
  const float* data() const { return data_; }

 private:
  static constexpr size_t kStack = 512;
  float stack_[kStack];
  std::vector<float> heap_;
  float* data_;
};

// <query, k_token>
inline float body_key_dot(const float* query, const BodyView& body, size_t token) {
  if (body.half_keys == nullptr) return simd::dot(query, body.keys + token * body.dim, body.dim);
  return simd::dot(query, WideRow(body.half_keys + token * body.dim, body.dim).data(), body.dim);
}

// out += weight * v_token
inline void body_add_value(float weight, const BodyView& body, size_t token, float* out) {
  if (body.half_values == nullptr) return simd::axpy(weight, body.values + token * body.dim, out, body.dim);
  simd::axpy(weight, WideRow(body.half_values + token * body.dim, body.dim).data(), out, body.dim);
}

inline void body_prefetch(const BodyView& body, size_t token, bool key) {
  const size_t d = body.dim;
  const uint16_t* half = key ? body.half_keys : body.half_values;
  if (half)
    simd::prefetch_bytes(half + token * d, d * sizeof(uint16_t));
  else
    simd::prefetch_bytes((key ? body.keys : body.values) + token * d, d * sizeof(float));
}

}  // namespace kvsketch
