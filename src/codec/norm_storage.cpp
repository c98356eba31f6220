#include "codec/norm_storage.hpp"

#include <vector>

#include "core/kernel_memory.hpp"
#include "simd/attention_kernels.hpp"

namespace kvsketch {

void load_norms(NormPrecision precision, const uint8_t* rows, size_t stride, size_t n, float* out) {
  if (precision == NormPrecision::kFp32) {
    for (size_t i = 0; i < n; ++i) std::memcpy(out + i, rows + i * stride, 4);
    return;
  }
  KernelVector<uint16_t> halves(n);
  for (size_t i = 0; i < n; ++i) std::memcpy(&halves[i], rows + i * stride, 2);
  simd::half_to_float_row(halves.data(), n, out);
}

}  // namespace kvsketch
