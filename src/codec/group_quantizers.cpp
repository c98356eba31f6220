#include "codec/group_quantizers.hpp"

#include "codec/attention_parts.hpp"
#include "codec/plain_query.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kvsketch/bitpack.hpp"
#include "core/require.hpp"
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
    : CodecBase(dim), scheme_(scheme), bits_(bits), group_(group) {
  require(bits >= 1 && bits <= 8, "group quantizer: bits must be in 1..8, got {}", bits);
  require(group >= 1 && group <= 1024, "group quantizer: group must be in 1..1024, got {}", group);
  value_bytes_ = packed_bytes(dim, bits);
  meta_offset_ = value_bytes_;
  if (scheme == GroupScheme::kKiviKeys) {
    code_bytes_ = value_bytes_ + (4 * dim + group - 1) / group;  // this row's share of the group's minima and steps
  } else {
    code_bytes_ = value_bytes_ + (scaled() ? 2 : 4) * channel_groups();
  }
}

std::string GroupQuantizer::spec() const {
  if (scheme_ == GroupScheme::kQ4_0) return "q4_0";
  if (scheme_ == GroupScheme::kQ8_0) return "q8_0";
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
      if (scheme_ == GroupScheme::kQ8_0) {
        float magnitude = 0.0f;
        for (size_t c = begin; c < end; ++c) magnitude = std::max(magnitude, std::abs(row[c]));
        const float scale = store_half(magnitude / 127.0f, code + meta_offset_ + 2 * j, first_row + i);
        const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
        for (size_t c = begin; c < end; ++c)
          levels[c] = static_cast<uint8_t>(std::clamp(std::nearbyint(row[c] * inverse), -127.0f, 127.0f) + 128.0f);
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
      if (i % group_ == 0) key_group_meta(code, halves, meta.data());
      simd::affine_decode(levels.data(), d, meta.data(), meta.data() + d, 1, 0, row);
      continue;
    }
    if (scaled()) {  // x = scale (q - center)
      std::memcpy(halves.data(), code + meta_offset_, 2 * groups);
      simd::half_to_float_row(halves.data(), groups, step.data());
      simd::affine_decode(levels.data(), d, low.data(), step.data(), group_, center(), row);
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

void GroupQuantizer::key_group_meta(const uint8_t* rows, std::vector<uint16_t>& halves, float* meta) const {
  const size_t share = code_bytes_ - meta_offset_;
  halves.resize((share * group_ + 1) / 2);
  auto* stream = reinterpret_cast<uint8_t*>(halves.data());
  for (size_t t = 0; t < group_; ++t) std::memcpy(stream + t * share, rows + t * code_bytes_ + meta_offset_, share);
  simd::half_to_float_row(halves.data(), 2 * dim(), meta);
}

simd::RowSource GroupQuantizer::level_rows(const uint8_t* codes, size_t first, size_t count) const {
  static const auto levels = [] {
    std::array<float, 256> table{};
    for (size_t l = 0; l < table.size(); ++l) table[l] = static_cast<float>(l);
    return table;
  }();
  const size_t offset = first * static_cast<size_t>(bits_) / 8;
  // 8-bit levels are their bytes: converted in registers, not looked up (q8_0).
  if (bits_ == 8) return {simd::RowFormat::kUint8, codes + offset, code_bytes_, count, 0, nullptr, code_bytes_ - offset};
  return {simd::RowFormat::kIndex, codes + offset, code_bytes_, count, bits_, levels.data(), code_bytes_ - offset};
}

// The multi-query forms read the levels where they lie (the row kernels look them up in
// registers) and apply the affine maps outside the sums, instead of decoding blocks to floats:
// keys, per group of rows: <q, min + step * level> = <q, min> + <q * step, level>;
// values and q4_0, per channel group g: sum_t w_t (min_tg + step_tg level_t) =
// sum_t w_t min_tg + sum_t (w_t step_tg) level_t.
void GroupQuantizer::token_group_meta(const uint8_t* rows, size_t count, size_t g, TokenMeta& meta) const {
  const size_t groups = channel_groups(), per_row = (scaled() ? 1 : 2) * groups;
  if (g == 0) {  // the block's fp16 metadata as floats, once
    meta.halves.resize(count * per_row);
    meta.floats.resize(count * per_row);
    // A row's metadata in one fixed-size copy for d = 128's sizes (q4_0: 4 halves, KIVI values:
    // 8); a call to memcpy per row took a sixth of the q4_0 step.
    const auto gather = [&](auto bytes) {
      for (size_t i = 0; i < count; ++i)
        std::memcpy(&meta.halves[i * per_row], rows + i * code_bytes_ + meta_offset_, decltype(bytes)::value);
    };
    if (per_row == 4) {
      gather(std::integral_constant<size_t, 8>{});
    } else if (per_row == 8) {
      gather(std::integral_constant<size_t, 16>{});
    } else {
      for (size_t i = 0; i < count; ++i)
        std::memcpy(&meta.halves[i * per_row], rows + i * code_bytes_ + meta_offset_, 2 * per_row);
    }
    simd::half_to_float_row(meta.halves.data(), count * per_row, meta.floats.data());
  }
  meta.low.resize(count);
  meta.step.resize(count);
  if (scaled()) {  // x = scale (level - center) = -center scale + scale level
    for (size_t i = 0; i < count; ++i) {
      meta.step[i] = meta.floats[i * per_row + g];
      meta.low[i] = -static_cast<float>(center()) * meta.step[i];
    }
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    meta.low[i] = meta.floats[i * per_row + 2 * g];
    meta.step[i] = meta.floats[i * per_row + 2 * g + 1];
  }
}

bool GroupQuantizer::levels_by_channel_group() const {
  return scheme_ != GroupScheme::kKiviKeys && (group_ * static_cast<size_t>(bits_)) % 8 == 0;
}

void GroupQuantizer::score_rows_multi(const PreparedQuery* const* queries, size_t heads, const uint8_t* codes,
                                      size_t n, float* out, size_t stride, Arithmetic arithmetic) const {
  const size_t d = dim();
  if (arithmetic == Arithmetic::kInteger && attention_parts()) {
    // The integer kernels over the layout's parts, their scores added in order as the fused kernel
    // adds them: the same sums on every target.
    AttentionParts parts;
    key_parts(codes, queries, heads, parts);
    std::vector<float> partial(heads * n);
    for (size_t p = 0; p < parts.parts.size(); ++p) {
      const simd::AttentionPart& part = parts.parts[p];
      float* target = p == 0 ? out : partial.data();
      simd::int_index_scores(part.rows, n, part.queries, heads, part.scale, target, p == 0 ? stride : n,
                             part.row_factor());
      if (p > 0)
        for (size_t h = 0; h < heads; ++h)
          for (size_t i = 0; i < n; ++i) out[h * stride + i] += partial[h * n + i];
    }
    return;
  }
  if (levels_by_channel_group()) {
    // Per channel group g: <q, x_t> over g = low_tg sum(q over g) + step_tg <q over g, levels>.
    const size_t groups = channel_groups(), block = std::min(n, kMetaBlock);
    const KernelVector<float> stacked = stacked_plain_queries(queries, heads, d);
    std::vector<float> part_queries(heads * group_), partial(heads * block), query_sums(heads);
    TokenMeta meta;
    for (size_t h = 0; h < heads; ++h) std::fill(out + h * stride, out + h * stride + n, 0.0f);
    for (size_t start = 0; start < n; start += kMetaBlock) {
      const size_t count = std::min(kMetaBlock, n - start);
      const uint8_t* rows = codes + start * code_bytes_;
      for (size_t g = 0; g < groups; ++g) {
        token_group_meta(rows, count, g, meta);
        const size_t first = g * group_, channels = std::min(group_, d - first);
        for (size_t h = 0; h < heads; ++h) {
          std::copy_n(stacked.data() + h * d + first, channels, part_queries.data() + h * channels);
          query_sums[h] = 0.0f;
          for (size_t c = 0; c < channels; ++c) query_sums[h] += part_queries[h * channels + c];
        }
        simd::row_scores(level_rows(rows, first, channels), count, part_queries.data(), heads, 1.0f, partial.data(),
                         block);
        for (size_t h = 0; h < heads; ++h) {
          float* target = out + h * stride + start;
          for (size_t i = 0; i < count; ++i)
            target[i] += meta.low[i] * query_sums[h] + meta.step[i] * partial[h * block + i];
        }
      }
    }
    return;
  }
  if (scheme_ != GroupScheme::kKiviKeys)
    return CodecBase::score_rows_multi(queries, heads, codes, n, out, stride, arithmetic);
  const KernelVector<float> stacked = stacked_plain_queries(queries, heads, d);
  std::vector<uint16_t> halves;
  std::vector<float> meta(2 * d), scaled(heads * d), constant(heads);
  for (size_t start = 0; start < n; start += group_) {
    const uint8_t* rows = codes + start * code_bytes_;
    key_group_meta(rows, halves, meta.data());
    for (size_t h = 0; h < heads; ++h) {
      const float* q = stacked.data() + h * d;
      for (size_t c = 0; c < d; ++c) scaled[h * d + c] = q[c] * meta[d + c];
      constant[h] = simd::dot(q, meta.data(), d);
    }
    simd::row_scores(level_rows(rows, 0, d), group_, scaled.data(), heads, 1.0f, out + start, stride);
    for (size_t h = 0; h < heads; ++h)
      for (size_t t = 0; t < group_; ++t) out[h * stride + start + t] += constant[h];
  }
}

void GroupQuantizer::accumulate_rows_multi(const float* weights, size_t heads, size_t stride, const uint8_t* codes,
                                           size_t n, float* accumulators, Arithmetic arithmetic) const {
  if (arithmetic == Arithmetic::kInteger && attention_parts()) {
    AttentionParts parts;
    value_parts(codes, accumulators, dim(), parts);
    for (const simd::AttentionPart& part : parts.parts)
      simd::int_index_weighted_sum(part.rows, n, weights, heads, stride, part.acc, part.acc_stride,
                                   part.row_factor());
    return;
  }
  if (!levels_by_channel_group())
    return CodecBase::accumulate_rows_multi(weights, heads, stride, codes, n, accumulators, arithmetic);
  const size_t d = dim(), groups = channel_groups(), block = std::min(n, kMetaBlock);
  std::vector<float> scaled(heads * block);
  std::vector<float> constant(heads * groups, 0.0f);  // sum_t w_t low_tg per head and group
  TokenMeta meta;
  for (size_t start = 0; start < n; start += kMetaBlock) {
    const size_t count = std::min(kMetaBlock, n - start);
    const uint8_t* rows = codes + start * code_bytes_;
    for (size_t g = 0; g < groups; ++g) {
      token_group_meta(rows, count, g, meta);
      for (size_t h = 0; h < heads; ++h) {
        const float* w = weights + h * stride + start;
        for (size_t i = 0; i < count; ++i) scaled[h * block + i] = w[i] * meta.step[i];
        constant[h * groups + g] += simd::dot(w, meta.low.data(), count);
      }
      const size_t first = g * group_, channels = std::min(group_, d - first);
      simd::row_weighted_sum(level_rows(rows, first, channels), count, scaled.data(), heads, block,
                             accumulators + first, d);
    }
  }
  for (size_t h = 0; h < heads; ++h)
    for (size_t g = 0; g < groups; ++g) {
      const float add = constant[h * groups + g];
      for (size_t c = g * group_; c < std::min(d, (g + 1) * group_); ++c) accumulators[h * d + c] += add;
    }
}

RowLayout::Part GroupQuantizer::group_part(size_t g) const {
  const size_t first = g * group_;
  RowLayout::Part part;
  part.indices = {first * static_cast<size_t>(bits_) / 8, std::min(group_, dim() - first), bits_, {}};
  for (int l = 0; l < (1 << bits_); ++l) part.indices.table.push_back(static_cast<float>(l - center()));
  part.factor = RowLayout::Factor{meta_offset_ + 2 * g, true};
  part.domain = first;
  return part;
}

void GroupQuantizer::describe_row(RowLayout& layout) const {
  if (!attention_parts()) return CodecBase::describe_row(layout);
  layout.row_bytes = code_bytes_;
  layout.fields.push_back({0, value_bytes_, std::min<size_t>(static_cast<size_t>(bits_), value_bytes_)});
  for (size_t g = 0; g < channel_groups(); ++g) layout.fields.push_back({meta_offset_ + 2 * g, 2, 2});
  layout.has_keys = layout.has_values = true;
  layout.key_domain = layout.accumulator = dim();
  for (size_t g = 0; g < channel_groups(); ++g) {
    layout.key_parts.push_back(group_part(g));
    layout.value_parts.push_back(group_part(g));
  }
  layout.key_groups.push_back({0, channel_groups(), std::nullopt});
}

void GroupQuantizer::key_domain(const PreparedQuery& q, float* out) const {
  const std::vector<float>& values = static_cast<const PlainQuery&>(q).values;
  std::copy(values.begin(), values.end(), out);
}

std::unique_ptr<PreparedQuery> GroupQuantizer::prepare_query(const float* q) const {
  return plain_query(q, dim());
}

// One query: the multi-query forms with one head (the levels read where they lie, the affine maps
// applied outside the sums).
void GroupQuantizer::score_rows(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const {
  score_rows_one_head(q, codes, n, out);
}

void GroupQuantizer::accumulate_rows(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const {
  accumulate_rows_one_head(weights, codes, n, accumulator);
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
