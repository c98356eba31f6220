// Kernels of decode attention over fp16 rows (sinks, recent window, fp16 baseline) and the
// softmax pieces shared with the compressed path. Query-time only: results may differ between
// instruction sets in the last bits (sum order, exp approximation); they are compared against
// the fp32 reference with a tolerance.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvsketch::simd {

// out[i] = half_to_float(in[i]) (exact).
void half_to_float_row(const uint16_t* in, size_t n, float* out);

// out[i] = float_to_half(in[i]) (round to nearest even, exact on every target).
void float_to_half_row(const float* in, size_t n, uint16_t* out);

// scores[h * stride + i] = scale * <queries[h], keys[i]> for h < heads, i < n; keys are n rows of
// d halves, queries heads rows of d floats.
void half_row_scores(const float* queries, size_t heads, const uint16_t* keys, size_t n, size_t d, float scale,
                     float* scores, size_t stride);

// The same over float rows.
void float_row_scores(const float* queries, size_t heads, const float* keys, size_t n, size_t d, float scale,
                      float* scores, size_t stride);

// acc[h * d + j] += sum_i weights[h * stride + i] * values[i][j].
void half_row_weighted_sum(const float* weights, size_t heads, size_t stride, const uint16_t* values, size_t n,
                           size_t d, float* acc);

// acc[h * d + j] += sum_i weights[h * stride + i] * rows[i][j] for float rows.
void float_row_weighted_sum(const float* weights, size_t heads, size_t stride, const float* rows, size_t n, size_t d,
                            float* acc);

// x[i] = exp(x[i] - shift) for shift >= max x (softmax weights; below e^-86 they are 0); returns
// the sum of the new values.
float exp_shifted_sum(float* x, size_t n, float shift);

// max_i x[i] (-inf for n = 0).
float max_value(const float* x, size_t n);

}  // namespace kvsketch::simd
