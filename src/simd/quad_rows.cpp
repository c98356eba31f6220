#include "simd/quad_rows.hpp"

#include <algorithm>
#include <cstring>

#include "kvsketch/bitpack.hpp"
#include "kvsketch/error.hpp"

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
}

bool QuadLayout::covers_rows() const {
  std::vector<int> used(stride_, 0);
  for (const QuadField& field : fields_)
    for (size_t byte = 0; byte < field.bytes; ++byte) ++used[field.offset + byte];
  return std::all_of(used.begin(), used.end(), [](int count) { return count == 1; });
}

namespace {
// move(offset in the row, offset in the quad, bytes) for every chunk of row r of the fields.
template <class Move>
void for_each_chunk(const std::vector<QuadField>& fields, size_t r, const Move& move) {
  for (const QuadField& field : fields)
    for (size_t byte = 0; byte < field.bytes; byte += field.chunk)
      move(field.offset + byte, quad_byte(field, r, byte), std::min(field.chunk, field.bytes - byte));
}

void require_quads(size_t n) { require(n % 4 == 0, "rows in quads: {} rows is not a whole number of quads", n); }
}  // namespace

void QuadLayout::to_quads(const uint8_t* rows, size_t n, uint8_t* out) const {
  require_quads(n);
  for (size_t quad = 0; quad < n; quad += 4)
    for (size_t r = 0; r < 4; ++r)
      for_each_chunk(fields_, r, [&](size_t plain, size_t in_quad, size_t bytes) {
        std::memcpy(out + quad * stride_ + in_quad, rows + (quad + r) * stride_ + plain, bytes);
      });
}

void QuadLayout::to_rows(const uint8_t* quads, size_t n, uint8_t* out) const {
  require_quads(n);
  for (size_t quad = 0; quad < n; quad += 4)
    for (size_t r = 0; r < 4; ++r)
      for_each_chunk(fields_, r, [&](size_t plain, size_t in_quad, size_t bytes) {
        std::memcpy(out + (quad + r) * stride_ + plain, quads + quad * stride_ + in_quad, bytes);
      });
}

void QuadLayout::row(const uint8_t* quads, size_t row, uint8_t* out) const {
  const uint8_t* quad = quads + (row - row % 4) * stride_;
  for_each_chunk(fields_, row % 4,
                 [&](size_t plain, size_t in_quad, size_t bytes) { std::memcpy(out + plain, quad + in_quad, bytes); });
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
