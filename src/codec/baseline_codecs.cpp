#include "codec/baseline_codecs.hpp"
#include "codec/plain_query.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kvsketch/half.hpp"
#include "simd/attention_kernels.hpp"
#include "simd/row_kernels.hpp"

namespace kvsketch {
void Fp16Codec::encode_rows(const float* x, size_t n, uint8_t* codes, size_t first_row) const {
  require_finite(x, n, dim(), "encode", first_row);
  // Beyond +-65504 saturates to Inf, as in any fp16 cache. (The rows are read as uint16_t everywhere.)
  simd::float_to_half_row(x, n * dim(), reinterpret_cast<uint16_t*>(codes));
}

std::unique_ptr<PreparedQuery> Fp16Codec::prepare_query(const float* q) const { return plain_query(q, dim()); }

// Rows of fp16 are read straight from the codes by the attention kernels (F16C where present).
void Fp16Codec::score_rows(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const {
  const auto& query = static_cast<const PlainQuery&>(q).values;
  simd::half_row_scores(query.data(), 1, reinterpret_cast<const uint16_t*>(codes), n, dim(), 1.0f, out, n);
}

void Fp16Codec::accumulate_rows(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const {
  simd::half_row_weighted_sum(weights, 1, n, reinterpret_cast<const uint16_t*>(codes), n, dim(), accumulator);
}

void Fp16Codec::score_rows_multi(const PreparedQuery* const* queries, size_t heads, const uint8_t* codes, size_t n,
                                 float* out, size_t stride, Arithmetic) const {
  const KernelVector<float> stacked = stacked_plain_queries(queries, heads, dim());
  simd::half_row_scores(stacked.data(), heads, reinterpret_cast<const uint16_t*>(codes), n, dim(), 1.0f, out, stride);
}

void Fp16Codec::accumulate_rows_multi(const float* weights, size_t heads, size_t stride, const uint8_t* codes, size_t n,
                                      float* accumulators, Arithmetic) const {
  simd::half_row_weighted_sum(weights, heads, stride, reinterpret_cast<const uint16_t*>(codes), n, dim(), accumulators);
}

void Int8Codec::encode_rows(const float* x, size_t n, uint8_t* codes, size_t first_row) const {
  require_finite(x, n, dim(), "encode", first_row);
  for (size_t i = 0; i < n; ++i) {
    const float* row = x + i * dim();
    uint8_t* code = codes + i * code_bytes();
    float largest = 0.0f;
    for (size_t j = 0; j < dim(); ++j) largest = std::max(largest, std::abs(row[j]));
    const float scale = largest / 127.0f;
    const float inverse = largest > 0.0f ? 127.0f / largest : 0.0f;
    for (size_t j = 0; j < dim(); ++j)
      code[j] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(std::nearbyint(row[j] * inverse), -127.0f, 127.0f)));
    std::memcpy(code + dim(), &scale, 4);
  }
}

std::unique_ptr<PreparedQuery> Int8Codec::prepare_query(const float* q) const { return plain_query(q, dim()); }

// One query: the multi-query forms with one head (the rows converted in registers).
void Int8Codec::score_rows(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const {
  score_rows_one_head(q, codes, n, out);
}

void Int8Codec::accumulate_rows(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const {
  accumulate_rows_one_head(weights, codes, n, accumulator);
}

void Int8Codec::decode_rows(const uint8_t* codes, size_t n, float* out) const {
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* code = codes + i * code_bytes();
    float scale;
    std::memcpy(&scale, code + dim(), 4);
    for (size_t j = 0; j < dim(); ++j) out[i * dim() + j] = scale * static_cast<float>(static_cast<int8_t>(code[j]));
  }
}

// The GQA group's heads read the int8 rows where they lie (converted in registers, as fp16 is), in
// blocks small enough that their scales are still in L2 when the block's scores are scaled.
namespace {
constexpr size_t kInt8Block = 1024;
}

simd::RowSource Int8Codec::int8_rows(const uint8_t* codes) const {
  simd::RowSource src;
  src.format = simd::RowFormat::kInt8;
  src.data = codes;
  src.stride = code_bytes();
  src.dim = dim();
  return src;
}

void Int8Codec::row_scales(const uint8_t* codes, size_t n, float* out) const {
  for (size_t i = 0; i < n; ++i) std::memcpy(&out[i], codes + i * code_bytes() + dim(), 4);
}

void Int8Codec::score_rows_multi(const PreparedQuery* const* queries, size_t heads, const uint8_t* codes, size_t n,
                                 float* out, size_t stride, Arithmetic) const {
  const KernelVector<float> stacked = stacked_plain_queries(queries, heads, dim());
  KernelVector<float> scales(std::min(n, kInt8Block));
  for (size_t start = 0; start < n; start += kInt8Block) {
    const size_t count = std::min(kInt8Block, n - start);
    const uint8_t* block = codes + start * code_bytes();
    simd::row_scores(int8_rows(block), count, stacked.data(), heads, 1.0f, out + start, stride);
    row_scales(block, count, scales.data());
    for (size_t h = 0; h < heads; ++h)
      for (size_t i = 0; i < count; ++i) out[h * stride + start + i] *= scales[i];
  }
}

void Int8Codec::accumulate_rows_multi(const float* weights, size_t heads, size_t stride, const uint8_t* codes,
                                      size_t n, float* accumulators, Arithmetic) const {
  const size_t block_rows = std::min(n, kInt8Block);
  KernelVector<float> scales(block_rows), scaled(heads * block_rows);
  for (size_t start = 0; start < n; start += kInt8Block) {
    const size_t count = std::min(kInt8Block, n - start);
    const uint8_t* block = codes + start * code_bytes();
    row_scales(block, count, scales.data());
    for (size_t h = 0; h < heads; ++h)
      for (size_t i = 0; i < count; ++i) scaled[h * block_rows + i] = weights[h * stride + start + i] * scales[i];
    simd::row_weighted_sum(int8_rows(block), count, scaled.data(), heads, block_rows, accumulators, dim());
  }
}

}  // namespace kvsketch
