// Storage of per-vector scalars (norms, residual norms, scales) in fp16 or fp32.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#include "core/require.hpp"
#include "kvsketch/half.hpp"

namespace kvsketch {

enum class NormPrecision { kFp16, kFp32 };

inline size_t norm_bytes(NormPrecision precision) { return precision == NormPrecision::kFp16 ? 2 : 4; }
inline std::string norm_precision_name(NormPrecision precision) {
  return precision == NormPrecision::kFp16 ? "fp16" : "fp32";
}

// Writes value; fp16 refuses values beyond its range rather than storing Inf.
inline void store_norm(NormPrecision precision, float value, uint8_t* destination) {
  if (precision == NormPrecision::kFp32) {
    std::memcpy(destination, &value, 4);
    return;
  }
  require(value <= kHalfMax, "encode: vector norm {} exceeds the fp16 range ({}); use norm=fp32", value, kHalfMax);
  const uint16_t half = float_to_half(value);
  std::memcpy(destination, &half, 2);
}

inline float load_norm(NormPrecision precision, const uint8_t* source) {
  if (precision == NormPrecision::kFp32) {
    float value;
    std::memcpy(&value, source, 4);
    return value;
  }
  uint16_t half;
  std::memcpy(&half, source, 2);
  return half_to_float(half);
}

// out[i] = the value stored at rows + i * stride, for n rows (fp16 converted with SIMD).
void load_norms(NormPrecision precision, const uint8_t* rows, size_t stride, size_t n, float* out);

}  // namespace kvsketch
