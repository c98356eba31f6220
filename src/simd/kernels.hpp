// Kernels behind runtime SIMD dispatch (Highway). Each has a scalar reference in
// kvsketch::simd::reference that the tests compare against. Encode-path kernels (everything but the
// dot products) are bit-exact across instruction sets: they use only element-wise IEEE operations
// and fixed-order reductions, so the same seed gives the same codes on every machine.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvsketch::simd {

// In-place unnormalized Walsh-Hadamard transform of n = 2^k floats.
void fwht(float* data, size_t n);
// multiply(data, factors, n) then fwht(data, n), in fewer passes over memory.
void multiply_fwht(float* data, const float* factors, size_t n);
// out[i] = (in[i] * scale) * factors[i] (factors may be null), then fwht(out, n); in == out allowed.
void scaled_multiply_fwht(const float* in, float scale, const float* factors, float* out, size_t n);
// data[i] *= factors[i]
void multiply(float* data, const float* factors, size_t n);
// data[i] *= factor
void scale(float* data, float factor, size_t n);
// Sum of x[i]^2 in a fixed order (64 interleaved partial sums, then a fixed tree).
float sum_of_squares(const float* x, size_t n);
// Sum of x[i] * y[i] in the same fixed order (bit-exact across instruction sets).
float fixed_order_dot(const float* x, const float* y, size_t n);
// Sum of x[i] in the same fixed order.
float fixed_order_sum(const float* x, size_t n);
// out[i] = in[i] - centre[i] (centre null: out[i] = in[i]; out may be in), returning
// sum_of_squares(out, n) from the same pass: the same bits.
float subtract_sum_of_squares(const float* in, const float* centre, float* out, size_t n);
struct QuantizerGrid;
// indices[i] = number of boundaries strictly below values[i] (boundaries sorted, count = 2^bits - 1).
// `grid`, if given, is make_quantizer_grid(boundaries, bits) (quantizer_grid.hpp): the same count
// by fewer look-ups, taken where that is faster (8-lane targets).
void quantize(const float* values, size_t n, const float* boundaries, int bits, uint8_t* indices,
              const QuantizerGrid* grid = nullptr);
// out[i] = values[i] - table[indices[i]] (the residual after quantization; any table size).
void subtract_table(const float* values, const uint8_t* indices, size_t n, const float* table, size_t table_size,
                    float* out);
// <values, table[indices]> as sum_of_squares(values) - fixed_order_dot(values, residual) with the
// residual of subtract_table: the same bits, without storing the residual.
float codeword_dot(const float* values, const uint8_t* indices, size_t n, const float* table, size_t table_size);
// quantize, pack_bits(indices, n, bits, packed) and codeword_dot(values, indices, ...) in one
// call: the same bytes and bits, in one pass where the target has a fused kernel (4-bit codes on
// 8-lane targets). scratch: n bytes of working space (left unspecified).
float quantize_pack_dot(const float* values, size_t n, const float* boundaries, int bits, const QuantizerGrid* grid,
                        const float* table, size_t table_size, uint8_t* packed, uint8_t* scratch);
// packed bit i = (x[i] > 0), LSB-first; packed holds ceil(n / 8) bytes.
void sign_bits(const float* x, size_t n, uint8_t* packed);
// out[r] = sum_c matrix[c * rows + r] * x[c], for c = 0..cols-1 in order (column-major matrix).
void matvec_columns(const float* matrix, size_t rows, size_t cols, const float* x, float* out);
// Dot product, any order (query-time only).
float dot(const float* a, const float* b, size_t n);
// out[i * out_stride + j] ~= <a_i, b_j> for rows a_0..a_{na-1} and b_0..b_{nb-1} (n floats each,
// row-major): register tiles of fused multiply-adds, the order of the sums depending on the
// instruction set. Within 2 * gamma_n * sum |a_i b_i| of fixed_order_dot. For a few rows a; many
// rows amortize packing b for dot_panel, which runs nearer the FMA peak.
void dot_tile(const float* a, size_t na, const float* b, size_t nb, size_t n, float* out, size_t out_stride);
// Columns that dot_panel computes for nb vectors: nb rounded up to a multiple of 16 floats (every
// target's vector width divides it).
constexpr size_t dot_panel_columns(size_t nb) { return (nb + 15) / 16 * 16; }
// Packs nb vectors b_j (n floats each, row-major) for dot_panel: strips of 16 vectors, each strip
// k-major (16 floats per k), zeros past nb. packed holds dot_panel_columns(nb) * n floats.
void pack_dot_panel(const float* b, size_t nb, size_t n, float* packed);
// out[i * out_stride + j] ~= <a_i, b_j> for rows a_0..a_{na-1} (n floats each, row-major) and every
// j < columns (= dot_panel_columns(nb); 0 past nb) of the packed vectors. Register tiles of fused
// multiply-adds, each sum in k order, the tile depending on the instruction set. Within
// 2 * gamma_n * sum |a_i b_i| of fixed_order_dot, for callers that confirm exactly what they pick.
void dot_panel(const float* a, size_t na, const float* packed, size_t columns, size_t n, float* out, size_t out_stride);
// out[i] += w * x[i]
void axpy(float w, const float* x, float* out, size_t n);
// sums[i] += double(x[i]) (exact widening: the same sums on every target)
void add_to_double_sums(const float* x, double* sums, size_t n);
// The largest of the bit patterns of |x[i]| as unsigned integers (0 for n = 0): above 0x7F800000
// where some x[i] is NaN, 0x7F800000 for an infinity, else the bits of max |x[i]|. Input checks
// compare it with a finite bound's bits in one pass.
uint32_t largest_magnitude_bits(const float* x, size_t n);
// out[k] = x[indices[k]] for k < n (indices below 2^31).
void gather_floats(const float* x, const uint32_t* indices, size_t n, float* out);
// Sum of x[i] in any order, reading ahead as the row kernels do: the memory read bandwidth probe.
float streamed_sum(const float* x, size_t n);
// The two passes of a screen over n approximate similarities s with a margin base + slope * norms[c]
// each (nearest_centroids). screen_lower_bounds first turns dot products into l2 similarities
// 2 s - squared where squared is given (in place), writes lower[c] = s[c] - margin and returns the
// largest of them (or a NaN where one is NaN); screen_select writes the indices c whose s[c] + margin reaches
// threshold, in order, and returns their count (out holds n). Margins may be fused or not: callers
// allow for their rounding.
float screen_lower_bounds(float* s, const float* squared, const float* norms, float base, float slope, size_t n,
                          float* lower);
size_t screen_select(const float* s, const float* norms, float base, float slope, float threshold, size_t n,
                     uint32_t* out);

// Asks for the cache lines of `bytes` bytes at `row` (scattered rows: sampled tokens).
inline void prefetch_bytes(const void* row, size_t bytes) {
  const char* start = static_cast<const char*>(row);
  for (size_t i = 0; i < bytes; i += 64) __builtin_prefetch(start + i);
}

// Name of the instruction set the dispatcher picked.
const char* active_target();
// Restricts dispatch to the target named by the environment variable KVSKETCH_TARGET (AVX3, AVX2,
// SSE4, ...; benchmarks use it to compare instruction sets). An unknown name throws Error.
void select_target_from_environment();

namespace reference {
void fwht(float* data, size_t n);
void multiply_fwht(float* data, const float* factors, size_t n);
void scaled_multiply_fwht(const float* in, float scale, const float* factors, float* out, size_t n);
void multiply(float* data, const float* factors, size_t n);
void scale(float* data, float factor, size_t n);
float sum_of_squares(const float* x, size_t n);
float fixed_order_dot(const float* x, const float* y, size_t n);
float fixed_order_sum(const float* x, size_t n);
// The fixed order: x[i] * y[i] added to partial i % kFixedOrderPartials, then the pairwise tree
// (partial[i] += partial[i + width] for width = 32, 16, ..., 1) of reduce_partials.
constexpr size_t kFixedOrderPartials = 64;
float reduce_partials(float* partial);  // overwrites partial
void quantize(const float* values, size_t n, const float* boundaries, int bits, uint8_t* indices);
void sign_bits(const float* x, size_t n, uint8_t* packed);
void subtract_table(const float* values, const uint8_t* indices, size_t n, const float* table, size_t table_size,
                    float* out);
float codeword_dot(const float* values, const uint8_t* indices, size_t n, const float* table, size_t table_size);
void matvec_columns(const float* matrix, size_t rows, size_t cols, const float* x, float* out);
float dot(const float* a, const float* b, size_t n);
void axpy(float w, const float* x, float* out, size_t n);
}  // namespace reference

}  // namespace kvsketch::simd
