#include "simd/quad_rows.hpp"

#include <algorithm>
#include <cstring>

#include <hwy/base.h>

#include "kvsketch/bitpack.hpp"
#include "core/require.hpp"

namespace kvsketch::simd {

size_t quad_byte(const QuadField& field, size_t r, size_t byte) {
  const size_t k = byte / field.chunk, whole = field.bytes / field.chunk;
  if (k < whole) return 4 * field.offset + (4 * k + r) * field.chunk + byte % field.chunk;
  const size_t tail = field.bytes - whole * field.chunk;
  return 4 * field.offset + 4 * field.chunk * whole + r * tail + (byte - whole * field.chunk);
}

std::vector<QuadField> index_fields(const RowSource& rows, const std::vector<const RowFactor*>& factors) {
  const size_t packed = packed_bytes(rows.dim, rows.bits);
  std::vector<QuadField> fields{{0, packed, std::min(packed, static_cast<size_t>(rows.bits))}};
  for (const RowFactor* factor : factors) {
    if (factor == nullptr) continue;
    const size_t bytes = factor->half ? 2 : 4;
    fields.push_back({factor->offset, bytes, bytes});
  }
  return fields;
}

QuadLayout::QuadLayout(size_t stride, std::vector<QuadField> fields) : stride_(stride), fields_(std::move(fields)) {
  for (const QuadField& field : fields_)
    require(field.chunk >= 1 && field.chunk <= field.bytes && field.offset + field.bytes <= stride,
            "rows in quads: a field of {} bytes at {} in chunks of {} does not fit rows of {} bytes", field.bytes,
            field.offset, field.chunk, stride);
  for (size_t r = 0; r < 4; ++r)
    for (const QuadField& field : fields_)
      for (size_t byte = 0; byte < field.bytes; byte += field.chunk)
        moves_[r].push_back({static_cast<uint32_t>(field.offset + byte),
                             static_cast<uint32_t>(quad_byte(field, r, byte)),
                             static_cast<uint32_t>(std::min(field.chunk, field.bytes - byte))});
}

bool QuadLayout::covers_rows() const {
  std::vector<int> used(stride_, 0);
  for (const QuadField& field : fields_)
    for (size_t byte = 0; byte < field.bytes; ++byte) ++used[field.offset + byte];
  return std::all_of(used.begin(), used.end(), [](int count) { return count == 1; });
}

namespace {
// memcpy of a chunk: b-bit codes come in chunks of b <= 4 bytes, norms in 2 or 4; a copy of a size
// known to the compiler is a move. (A call per chunk, and quad_byte per chunk, made copying a
// 16k-token tq_mse:b=3 body back for AVX2's kernel take 10 times the kernel; now about 2 times.)
HWY_INLINE void copy_chunk(uint8_t* to, const uint8_t* from, size_t bytes) {
  switch (bytes) {
    case 1: return std::memcpy(to, from, 1), void();
    case 2: return std::memcpy(to, from, 2), void();
    case 3: return std::memcpy(to, from, 3), void();
    case 4: return std::memcpy(to, from, 4), void();
    default: std::memcpy(to, from, bytes);
  }
}

void require_quads(size_t n) { require(n % 4 == 0, "rows in quads: {} rows is not a whole number of quads", n); }
}  // namespace

void QuadLayout::to_quads(const uint8_t* rows, size_t n, uint8_t* out) const {
  require_quads(n);
  for (size_t quad = 0; quad < n; quad += 4)
    for (size_t r = 0; r < 4; ++r)
      for (const Move& move : moves_[r])
        copy_chunk(out + quad * stride_ + move.in_quad, rows + (quad + r) * stride_ + move.plain, move.bytes);
}

void QuadLayout::to_rows(const uint8_t* quads, size_t n, uint8_t* out) const {
  require_quads(n);
  for (size_t quad = 0; quad < n; quad += 4)
    for (size_t r = 0; r < 4; ++r)
      for (const Move& move : moves_[r])
        copy_chunk(out + (quad + r) * stride_ + move.plain, quads + quad * stride_ + move.in_quad, move.bytes);
}

void QuadLayout::row(const uint8_t* quads, size_t row, uint8_t* out) const {
  const uint8_t* quad = quads + (row - row % 4) * stride_;
  for (const Move& move : moves_[row % 4]) copy_chunk(out + move.plain, quad + move.in_quad, move.bytes);
}

std::vector<uint8_t> rows_from_quads(const RowSource& rows, size_t n, const std::vector<QuadField>& fields) {
  std::vector<uint8_t> out(n * rows.stride, 0);
  QuadLayout(rows.stride, fields).to_rows(rows.data, n, out.data());
  return out;
}

void quads_from_rows(const uint8_t* rows, size_t stride, size_t n, const std::vector<QuadField>& fields,
                     uint8_t* out) {
  QuadLayout(stride, fields).to_quads(rows, n, out);
}

}  // namespace kvsketch::simd
