// Scalar references for the dispatched kernels: the definition of what each kernel computes.
#include "simd/kernels.hpp"

#include <vector>

namespace kvsketch::simd::reference {

void fwht(float* data, size_t n) {
  for (size_t half = 1; half < n; half *= 2) {
    for (size_t block = 0; block < n; block += 2 * half) {
      for (size_t i = block; i < block + half; ++i) {
        const float a = data[i], b = data[i + half];
        data[i] = a + b;
        data[i + half] = a - b;
      }
    }
  }
}

void multiply(float* data, const float* factors, size_t n) {
  for (size_t i = 0; i < n; ++i) data[i] *= factors[i];
}

void multiply_fwht(float* data, const float* factors, size_t n) {
  multiply(data, factors, n);
  fwht(data, n);
}

void scaled_multiply_fwht(const float* in, float scale, const float* factors, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    out[i] = in[i] * scale;
    if (factors) out[i] *= factors[i];
  }
  fwht(out, n);
}

void scale(float* data, float factor, size_t n) {
  for (size_t i = 0; i < n; ++i) data[i] *= factor;
}

float sum_of_squares(const float* x, size_t n) { return fixed_order_dot(x, x, n); }

float fixed_order_dot(const float* x, const float* y, size_t n) {
  float partial[kFixedOrderPartials] = {};
  for (size_t i = 0; i < n; ++i) partial[i % kFixedOrderPartials] += x[i] * y[i];
  return reduce_partials(partial);
}

float fixed_order_sum(const float* x, size_t n) {
  float partial[kFixedOrderPartials] = {};
  for (size_t i = 0; i < n; ++i) partial[i % kFixedOrderPartials] += x[i];
  return reduce_partials(partial);
}

float reduce_partials(float* partial) {
  for (size_t width = kFixedOrderPartials / 2; width >= 1; width /= 2)
    for (size_t i = 0; i < width; ++i) partial[i] += partial[i + width];
  return partial[0];
}

void quantize(const float* values, size_t n, const float* boundaries, int bits, uint8_t* indices) {
  const int count = (1 << bits) - 1;
  for (size_t i = 0; i < n; ++i) {
    int index = 0;
    for (int k = 0; k < count; ++k) index += values[i] > boundaries[k];
    indices[i] = static_cast<uint8_t>(index);
  }
}

void sign_bits(const float* x, size_t n, uint8_t* packed) {
  for (size_t p = 0; p < (n + 7) / 8; ++p) packed[p] = 0;
  for (size_t i = 0; i < n; ++i) packed[i / 8] |= static_cast<uint8_t>((x[i] > 0.0f) << (i % 8));
}

void subtract_table(const float* values, const uint8_t* indices, size_t n, const float* table, size_t,
                    float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = values[i] - table[indices[i]];
}

void matvec_columns(const float* matrix, size_t rows, size_t cols, const float* x, float* out) {
  for (size_t r = 0; r < rows; ++r) out[r] = 0.0f;
  for (size_t c = 0; c < cols; ++c) {
    const float* column = matrix + c * rows;
    for (size_t r = 0; r < rows; ++r) out[r] += column[r] * x[c];
  }
}

float dot(const float* a, const float* b, size_t n) {
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(sum);
}

void axpy(float w, const float* x, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] += w * x[i];
}

float codeword_dot(const float* values, const uint8_t* indices, size_t n, const float* table, size_t table_size) {
  std::vector<float> residual(n);
  subtract_table(values, indices, n, table, table_size, residual.data());
  return sum_of_squares(values, n) - fixed_order_dot(values, residual.data(), n);
}

}  // namespace kvsketch::simd::reference
