// The integer kernels' rounding and their scalar definition (int_index_kernels.hpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/kernel_memory.hpp"

#include "kvsketch/bitpack.hpp"
#include "kvsketch/half.hpp"
#include "simd/attention_kernels.hpp"
#include "simd/int_index_kernels.hpp"
#include "simd/quad_rows.hpp"

namespace kvsketch::simd {

bool int_index_usable(const RowSource& rows) {
  return rows.format == RowFormat::kIndex && rows.bits >= 1 && rows.bits <= 4 && rows.table != nullptr;
}

float round_to_bytes(const float* x, size_t n, int8_t* out, int largest) {
  // Eight independent partial maxima instead of one chain of dependent ones (the maximum is the
  // same in any order).
  float partial[8] = {};
  size_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (size_t l = 0; l < 8; ++l) partial[l] = std::max(partial[l], std::fabs(x[j + l]));
  for (; j < n; ++j) partial[0] = std::max(partial[0], std::fabs(x[j]));
  float top = 0.0f;
  for (const float p : partial) top = std::max(top, p);
  if (top == 0.0f) {
    std::fill(out, out + n, int8_t{0});
    return 0.0f;
  }
  const float factor = static_cast<float>(largest) / top;
  // Round to nearest even as nearbyint does, without a library call per value: adding and taking
  // back 1.5 * 2^23 leaves the integer part (exact for |v| < 2^22; here |v| <= 127; the build's
  // -ffp-contract=off keeps the product rounded on its own, as before).
  constexpr float kMagic = 12582912.0f;
  for (size_t j = 0; j < n; ++j) out[j] = static_cast<int8_t>((x[j] * factor + kMagic) - kMagic);
  return top / static_cast<float>(largest);
}

void load_row_factors(const RowSource& rows, const RowFactor* factors, size_t first, size_t count, float* out) {
  if (factors == nullptr) {
    std::fill(out, out + count, 1.0f);
    return;
  }
  const size_t bytes = factors->half ? sizeof(uint16_t) : sizeof(float);
  for (size_t i = 0; i < count; ++i) {
    const size_t row = first + i;
    // In quads a factor is one chunk of its row's quad.
    const uint8_t* at = rows.quads ? rows.data + (row - row % 4) * rows.stride +
                                         quad_byte(QuadField{factors->offset, bytes, bytes}, row % 4, 0)
                                   : rows.data + row * rows.stride + factors->offset;
    if (factors->half) {
      uint16_t half;
      std::memcpy(&half, at, sizeof(half));
      out[i] = half_to_float(half);
    } else {
      std::memcpy(out + i, at, sizeof(float));
    }
  }
}

ByteTable byte_table(const float* table, int bits, int largest) {
  ByteTable out;
  const size_t size = size_t{1} << bits;
  // A table of whole numbers (q4_0's level - 8, QJL's signs) times the largest whole factor that
  // keeps it within +-largest: its levels then carry no rounding at all.
  float top = 0.0f;
  bool whole = true;
  for (size_t l = 0; l < size; ++l) {
    whole = whole && std::nearbyint(table[l]) == table[l];
    top = std::max(top, std::abs(table[l]));
  }
  if (whole && top >= 1.0f && top <= static_cast<float>(largest)) {
    const int factor = largest / static_cast<int>(top);
    for (size_t l = 0; l < size; ++l) out.levels[l] = static_cast<int8_t>(factor * static_cast<int>(table[l]));
    out.scale = 1.0f / static_cast<float>(factor);
    return out;
  }
  out.scale = round_to_bytes(table, size, out.levels, largest);
  return out;
}

bool int_index_attention_usable(const AttentionKeys& keys, const AttentionPart* values, size_t value_parts) {
  if (keys.count == 0 || value_parts == 0) return false;
  for (size_t g = 0; g < keys.count; ++g) {
    if (keys.groups[g].count == 0) return false;
    for (size_t p = 0; p < keys.groups[g].count; ++p)
      if (!int_index_usable(keys.groups[g].parts[p].rows)) return false;
  }
  for (size_t p = 0; p < value_parts; ++p)
    if (!int_index_usable(values[p].rows)) return false;
  return true;
}

namespace reference {

void int_index_scores(const RowSource& rows, size_t n, const float* queries, size_t heads, float scale, float* out,
                      size_t out_stride, const RowFactor* factors) {
  const size_t d = rows.dim;
  const ByteTable table = byte_table(rows.table, rows.bits, kScoreTableLargest);
  KernelVector<uint8_t> index(d);
  KernelVector<int8_t> query(d);
  KernelVector<float> row_factor(n);
  load_row_factors(rows, factors, 0, n, row_factor.data());
  for (size_t h = 0; h < heads; ++h) {
    const float factor = round_to_bytes(queries + h * d, d, query.data()) * table.scale * scale;
    for (size_t i = 0; i < n; ++i) {
      unpack_bits(rows.data + i * rows.stride, d, rows.bits, index.data());
      int32_t sum = 0;
      for (size_t j = 0; j < d; ++j) sum += query[j] * table.levels[index[j]];
      out[h * out_stride + i] = static_cast<float>(sum) * factor * row_factor[i];
    }
  }
}

void int_index_weighted_sum(const RowSource& rows, size_t n, const float* weights, size_t heads,
                            size_t weight_stride, float* acc, size_t acc_stride, const RowFactor* factors) {
  const size_t d = rows.dim;
  const ByteTable table = byte_table(rows.table, rows.bits);
  KernelVector<uint8_t> index(d);
  KernelVector<int32_t> sums(d);
  KernelVector<float> row_factor(n), w(kIntBlockRows);
  load_row_factors(rows, factors, 0, n, row_factor.data());
  for (size_t start = 0; start < n; start += kIntBlockRows) {
    const size_t end = std::min(n, start + kIntBlockRows);
    for (size_t h = 0; h < heads; ++h) {
      float top = 0.0f;
      for (size_t i = start; i < end; ++i) {
        w[i - start] = weights[h * weight_stride + i] * row_factor[i];
        top = std::max(top, std::fabs(w[i - start]));
      }
      if (top == 0.0f) continue;
      const float factor = kWeightLargest / top, block_scale = top / kWeightLargest * table.scale;
      std::fill(sums.begin(), sums.end(), 0);
      for (size_t i = start; i < end; ++i) {
        const int32_t word = static_cast<int32_t>(std::nearbyint(w[i - start] * factor));
        unpack_bits(rows.data + i * rows.stride, d, rows.bits, index.data());
        for (size_t j = 0; j < d; ++j) sums[j] += word * table.levels[index[j]];
      }
      float* a = acc + h * acc_stride;
      for (size_t j = 0; j < d; ++j) a[j] = a[j] + static_cast<float>(sums[j]) * block_scale;
    }
  }
}

bool int_index_attention(const AttentionKeys& keys, const AttentionPart* values, size_t value_parts, size_t n,
                         size_t heads, float* max, float* sum) {
  if (!int_index_attention_usable(keys, values, value_parts)) return false;
  // A part's rows from row `start` on: every factor is per row, so that a block's scores and sums
  // are the whole range's.
  const auto from = [](const RowSource& source, size_t start) {
    RowSource rows = source;
    rows.data += start * rows.stride;
    return rows;
  };
  std::fill(max, max + heads, -std::numeric_limits<float>::infinity());
  std::fill(sum, sum + heads, 0.0f);
  const size_t block = heads * kIntBlockRows;
  KernelVector<float> logits(block), group_scores(block), part_scores(block), row_factor(kIntBlockRows);
  for (size_t start = 0; start < n; start += kIntBlockRows) {
    const size_t count = std::min(kIntBlockRows, n - start);
    for (size_t g = 0; g < keys.count; ++g) {
      const AttentionKeyGroup& group = keys.groups[g];
      KernelVector<float>& target = g == 0 ? logits : group_scores;
      for (size_t p = 0; p < group.count; ++p) {
        const AttentionPart& part = group.parts[p];
        KernelVector<float>& out = p == 0 ? target : part_scores;
        reference::int_index_scores(from(part.rows, start), count, part.queries, heads, part.scale, out.data(),
                                    kIntBlockRows, part.row_factor());
        if (p > 0)
          for (size_t k = 0; k < block; ++k) target[k] += part_scores[k];
      }
      if (group.factor != nullptr) {
        load_row_factors(group.parts[0].rows, group.factor, start, count, row_factor.data());
        for (size_t h = 0; h < heads; ++h)
          for (size_t i = 0; i < count; ++i) target[h * kIntBlockRows + i] *= row_factor[i];
      }
      if (g > 0)
        for (size_t k = 0; k < block; ++k) logits[k] += group_scores[k];
    }
    if (keys.shift != nullptr)
      for (size_t h = 0; h < heads; ++h)
        for (size_t i = 0; i < count; ++i) logits[h * kIntBlockRows + i] += keys.shift[h];
    for (size_t h = 0; h < heads; ++h) {
      float* weights = logits.data() + h * kIntBlockRows;
      const float block_max = *std::max_element(weights, weights + count);
      if (block_max > max[h]) {
        if (max[h] != -std::numeric_limits<float>::infinity()) {
          float rescale = max[h];
          exp_shifted_sum(&rescale, 1, block_max);
          sum[h] *= rescale;
          for (size_t p = 0; p < value_parts; ++p)
            for (size_t j = 0; j < values[p].rows.dim; ++j) values[p].acc[h * values[p].acc_stride + j] *= rescale;
        }
        max[h] = block_max;
      }
      sum[h] += exp_shifted_sum(weights, count, max[h]);
    }
    for (size_t p = 0; p < value_parts; ++p)
      reference::int_index_weighted_sum(from(values[p].rows, start), count, logits.data(), heads, kIntBlockRows,
                                        values[p].acc, values[p].acc_stride, values[p].row_factor());
  }
  return true;
}

}  // namespace reference
}  // namespace kvsketch::simd
