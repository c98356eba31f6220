#include "simd/quad_rows.hpp"

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
  std::vector<QuadField> fields{{0, packed_bytes(rows.dim, rows.bits), static_cast<size_t>(rows.bits)}};
  for (const RowFactor* factor : factors) {
    if (factor == nullptr) continue;
    const size_t bytes = factor->half ? 2 : 4;
    fields.push_back({factor->offset, bytes, bytes});
  }
  return fields;
}

namespace {
template <class Move>
void for_each_quad_byte(size_t n, size_t stride, const std::vector<QuadField>& fields, const Move& move) {
  require(n % 4 == 0, "rows in quads: {} rows is not a whole number of quads", n);
  for (const QuadField& field : fields)
    require(field.chunk >= 1 && field.chunk <= field.bytes && field.offset + field.bytes <= stride,
            "rows in quads: a field of {} bytes at {} in chunks of {} does not fit rows of {} bytes", field.bytes,
            field.offset, field.chunk, stride);
  for (size_t quad = 0; quad < n; quad += 4)
    for (size_t r = 0; r < 4; ++r)
      for (const QuadField& field : fields)
        for (size_t byte = 0; byte < field.bytes; ++byte)
          move((quad + r) * stride + field.offset + byte, quad * stride + quad_byte(field, r, byte));
}
}  // namespace

std::vector<uint8_t> rows_from_quads(const RowSource& rows, size_t n, const std::vector<QuadField>& fields) {
  std::vector<uint8_t> out(n * rows.stride, 0);
  for_each_quad_byte(n, rows.stride, fields, [&](size_t plain, size_t quad) { out[plain] = rows.data[quad]; });
  return out;
}

void quads_from_rows(const uint8_t* rows, size_t stride, size_t n, const std::vector<QuadField>& fields,
                     uint8_t* out) {
  for_each_quad_byte(n, stride, fields, [&](size_t plain, size_t quad) { out[quad] = rows[plain]; });
}

}  // namespace kvsketch::simd
