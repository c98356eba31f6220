#include "codec/group_quantizers.hpp"
#include "codec/plain_query.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kvsketch/bitpack.hpp"
#include "kvsketch/error.hpp"
#include "kvsketch/half.hpp"
#include "simd/affine_kernels.hpp"
#include "simd/attention_kernels.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {
namespace {

// fp16 store of a scale or minimum; the codes are computed from the rounded value.
float store_half(float value, uint8_t* destination, size_t row) {
  require(std::abs(value) <= kHalfMax, "encode: row {} needs a group scale or minimum of {}, beyond fp16", row, value);
  const uint16_t half = float_to_half(value);
  std::memcpy(destination, &half, 2);
  return half_to_float(half);
}

uint8_t quantize_level(float x, float minimum, float step, unsigned top) {
  if (step <= 0.0f) return 0;
  const float level = std::nearbyint((x - minimum) / step);
  return static_cast<uint8_t>(std::clamp(level, 0.0f, static_cast<float>(top)));
}

}  // namespace

GroupQuantizer::GroupQuantizer(size_t dim, GroupScheme scheme, int bits, size_t group)
    : VectorCodec(dim), scheme_(scheme), bits_(bits), group_(group) {
  require(bits >= 1 && bits <= 8, "group quantizer: bits must be in 1..8, got {}", bits);
  require(group >= 1 && group <= 1024, "group quantizer: group must be in 1..1024, got {}", group);
  value_bytes_ = packed_bytes(dim, bits);
  meta_offset_ = value_bytes_;
  if (scheme == GroupScheme::kKiviKeys) {
    code_bytes_ = value_bytes_ + (4 * dim + group - 1) / group;  // this row's share of the group's minima and steps
  } else {
    code_bytes_ = value_bytes_ + (scheme == GroupScheme::kQ4_0 ? 2 : 4) * channel_groups();
  }
}

std::string GroupQuantizer::spec() const {
  if (scheme_ == GroupScheme::kQ4_0) return "q4_0";
  return fmt::format("{}:b={},group={}", scheme_ == GroupScheme::kKiviKeys ? "kivi_k" : "kivi_v", bits_, group_);
}

void GroupQuantizer::encode_rows(const float* x, size_t n, uint8_t* codes, size_t first_row) const {
  const size_t d = dim();
  require_finite(x, n, d, "encode", first_row);
  const unsigned top = (1u << bits_) - 1u;
  std::vector<uint8_t> levels(d);
  if (scheme_ == GroupScheme::kKiviKeys) {
    const size_t share = code_bytes_ - meta_offset_;
    std::vector<uint8_t> stream(share * group_, 0);  // [d fp16 minima][d fp16 steps]
    std::vector<float> minimum(d), step(d);
    for (size_t g = 0; g < n; g += group_) {
      const float* rows = x + g * d;
      for (size_t c = 0; c < d; ++c) {
        float low = rows[c], high = rows[c];
        for (size_t t = 1; t < group_; ++t) {
          low = std::min(low, rows[t * d + c]);
          high = std::max(high, rows[t * d + c]);
        }
        minimum[c] = store_half(low, stream.data() + 2 * c, first_row + g);
        step[c] = store_half((high - low) / static_cast<float>(top), stream.data() + 2 * (d + c), first_row + g);
      }
      for (size_t t = 0; t < group_; ++t) {
        uint8_t* code = codes + (g + t) * code_bytes_;
        for (size_t c = 0; c < d; ++c) levels[c] = quantize_level(rows[t * d + c], minimum[c], step[c], top);
        pack_bits(levels.data(), d, bits_, code);
        std::memcpy(code + meta_offset_, stream.data() + t * share, share);
      }
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const float* row = x + i * d;
    uint8_t* code = codes + i * code_bytes_;
    for (size_t j = 0; j < channel_groups(); ++j) {
      const size_t begin = j * group_, end = std::min(d, begin + group_);
      if (scheme_ == GroupScheme::kQ4_0) {
        float extreme = 0.0f;  // the value of largest magnitude, sign kept
        for (size_t c = begin; c < end; ++c)
          if (std::abs(row[c]) > std::abs(extreme)) extreme = row[c];
        const float scale = store_half(extreme / -8.0f, code + meta_offset_ + 2 * j, first_row + i);
        const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
        for (size_t c = begin; c < end; ++c)
          levels[c] = static_cast<uint8_t>(std::clamp(std::nearbyint(row[c] * inverse) + 8.0f, 0.0f, 15.0f));
        continue;
      }
      float low = row[begin], high = row[begin];
      for (size_t c = begin; c < end; ++c) {
        low = std::min(low, row[c]);
        high = std::max(high, row[c]);
      }
      const float minimum = store_half(low, code + meta_offset_ + 4 * j, first_row + i);
      const float step = store_half((high - low) / static_cast<float>(top), code + meta_offset_ + 4 * j + 2, first_row + i);
      for (size_t c = begin; c < end; ++c) levels[c] = quantize_level(row[c], minimum, step, top);
    }
    pack_bits(levels.data(), d, bits_, code);
  }
}

void GroupQuantizer::decode_rows(const uint8_t* codes, size_t n, float* out) const {
  const size_t d = dim(), groups = channel_groups();
  const bool keys = scheme_ == GroupScheme::kKiviKeys;
  const size_t share = code_bytes_ - meta_offset_;
  std::vector<uint8_t> levels(d);
  // Keys: the group's stream of [d fp16 minima][d fp16 steps] (share bytes from each of its rows);
  // values: a row's (minimum, step) per channel group; q4_0: a row's scale per channel group.
  std::vector<uint16_t> halves(keys ? (share * group_ + 1) / 2 : 2 * groups);
  std::vector<float> meta(keys ? 2 * d : 2 * groups), low(keys ? 0 : groups, 0.0f), step(keys ? 0 : groups);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* code = codes + i * code_bytes_;
    float* row = out + i * d;
    unpack_bits(code, d, bits_, levels.data());
    if (keys) {
      if (i % group_ == 0) {  // gather the group's minima and steps from its rows
        auto* stream = reinterpret_cast<uint8_t*>(halves.data());
        for (size_t t = 0; t < group_; ++t)
          std::memcpy(stream + t * share, codes + (i + t) * code_bytes_ + meta_offset_, share);
        simd::half_to_float_row(halves.data(), 2 * d, meta.data());
      }
      simd::affine_decode(levels.data(), d, meta.data(), meta.data() + d, 1, 0, row);
      continue;
    }
    if (scheme_ == GroupScheme::kQ4_0) {  // x = scale (q - 8)
      std::memcpy(halves.data(), code + meta_offset_, 2 * groups);
      simd::half_to_float_row(halves.data(), groups, step.data());
      simd::affine_decode(levels.data(), d, low.data(), step.data(), group_, 8, row);
      continue;
    }
    std::memcpy(halves.data(), code + meta_offset_, 4 * groups);
    simd::half_to_float_row(halves.data(), 2 * groups, meta.data());
    for (size_t j = 0; j < groups; ++j) {
      low[j] = meta[2 * j];
      step[j] = meta[2 * j + 1];
    }
    simd::affine_decode(levels.data(), d, low.data(), step.data(), group_, 0, row);
  }
}

std::unique_ptr<PreparedQuery> GroupQuantizer::prepare_query(const float* q) const {
  return plain_query(q, dim());
}

void GroupQuantizer::score_rows(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const {
  const auto& query = static_cast<const PlainQuery&>(q).values;
  std::vector<float> rows(row_group() * dim());
  for (size_t start = 0; start < n; start += row_group()) {
    decode_rows(codes + start * code_bytes_, row_group(), rows.data());
    for (size_t t = 0; t < row_group(); ++t) out[start + t] = simd::dot(query.data(), rows.data() + t * dim(), dim());
  }
}

void GroupQuantizer::accumulate_rows(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const {
  std::vector<float> rows(row_group() * dim());
  for (size_t start = 0; start < n; start += row_group()) {
    decode_rows(codes + start * code_bytes_, row_group(), rows.data());
    for (size_t t = 0; t < row_group(); ++t) simd::axpy(weights[start + t], rows.data() + t * dim(), accumulator, dim());
  }
}

bool GroupQuantizer::decode_domain_rows(const uint8_t* codes, size_t n, float* rows, float* row_scale) const {
  if (n) decode_rows(codes, n, rows);
  std::fill(row_scale, row_scale + n, 1.0f);
  return true;
}

const float* GroupQuantizer::domain_query(const PreparedQuery& q) const {
  return static_cast<const PlainQuery&>(q).values.data();
}

}  // namespace kvsketch
