#include "codec/quad_rows_codec.hpp"

#include <algorithm>
#include <numeric>

#include "codec/spec_of.hpp"
#include "core/require.hpp"
#include "core/kernel_memory.hpp"
#include "simd/int_index_kernels.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {
namespace {

// Rows copied back to plain rows at a time by the generic paths: the copy stays in L1.
constexpr size_t kPlainBlockRows = 64;
// Scattered rows: each quad fetched this many rows before its row is copied out.
constexpr size_t kRowsAhead = 8;

}  // namespace

simd::QuadLayout QuadRowsCodec::layout_of(const CodecBase& inner) {
  std::vector<simd::QuadField> fields;
  for (const RowLayout::Field& field : inner.row_layout().fields) fields.push_back({field.offset, field.bytes, field.chunk});
  simd::QuadLayout layout(inner.code_bytes(), std::move(fields));
  require(layout.covers_rows(), "codec {} in quads: its row fields do not cover each byte of a row once", SpecOf{inner});
  return layout;
}

QuadRowsCodec::QuadRowsCodec(std::unique_ptr<VectorCodec> inner)
    : CodecBase(inner->dim()), inner_(codec_base(std::move(inner))), layout_(layout_of(*inner_)) {}

bool QuadRowsCodec::rearranges(const VectorCodec& codec) {
  const std::vector<RowLayout::Field>& fields = codec.row_layout().fields;
  return !(fields.size() == 1 && fields[0].chunk == codec.code_bytes());
}

bool QuadRowsCodec::read_in_place(bool as_keys) const {
  const RowLayout& layout = row_layout();
  if (as_keys ? !layout.has_keys : !layout.has_values) return false;
  const std::vector<RowLayout::Part>& parts = as_keys ? layout.key_parts : layout.value_parts;
  return std::all_of(parts.begin(), parts.end(), reads_in_place);
}

bool QuadRowsCodec::reads_in_place(const RowLayout::Part& part) {
  simd::RowSource rows{simd::RowFormat::kIndex, nullptr, 0, part.indices.count, part.indices.bits,
                       part.indices.table.data()};
  rows.quads = true;
  return simd::int_index_reads_quads(rows);
}

size_t QuadRowsCodec::row_group() const { return std::lcm(size_t{4}, inner_->row_group()); }

template <class Run>
void QuadRowsCodec::for_each_plain_block(const uint8_t* codes, size_t n, const Run& run) const {
  const size_t block = std::lcm(kPlainBlockRows, row_group()), bytes = code_bytes();
  KernelVector<uint8_t> plain(std::min(n, block) * bytes);
  for (size_t first = 0; first < n; first += block) {
    const size_t count = std::min(block, n - first);
    layout_.to_rows(codes + first * bytes, count, plain.data());
    run(plain.data(), first, count);
  }
}

KernelVector<uint8_t> QuadRowsCodec::plain_rows(const uint8_t* codes, size_t n) const {
  KernelVector<uint8_t> plain(n * code_bytes());
  layout_.to_rows(codes, n, plain.data());
  return plain;
}

void QuadRowsCodec::encode_rows_given(const float* x, const float* squared_norms, size_t n, uint8_t* codes,
                                      size_t first_row) const {
  std::vector<uint8_t> plain(n * code_bytes());
  inner_->encode_rows_given(x, squared_norms, n, plain.data(), first_row);
  layout_.to_quads(plain.data(), n, codes);
}

void QuadRowsCodec::decode_rows(const uint8_t* codes, size_t n, float* out) const {
  for_each_plain_block(codes, n, [&](const uint8_t* plain, size_t first, size_t count) {
    inner_->decode_rows(plain, count, out + first * dim());
  });
}

void QuadRowsCodec::score_rows(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const {
  for_each_plain_block(codes, n, [&](const uint8_t* plain, size_t first, size_t count) {
    inner_->score_rows(q, plain, count, out + first);
  });
}

void QuadRowsCodec::accumulate_rows(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const {
  inner_->accumulate_rows(weights, plain_rows(codes, n).data(), n, accumulator);
}

void QuadRowsCodec::score_rows_multi(const PreparedQuery* const* queries, size_t heads, const uint8_t* codes, size_t n,
                                     float* out, size_t stride, Arithmetic arithmetic) const {
  for_each_plain_block(codes, n, [&](const uint8_t* plain, size_t first, size_t count) {
    inner_->score_rows_multi(queries, heads, plain, count, out + first, stride, arithmetic);
  });
}

void QuadRowsCodec::accumulate_rows_multi(const float* weights, size_t heads, size_t stride, const uint8_t* codes,
                                          size_t n, float* accumulators, Arithmetic arithmetic) const {
  inner_->accumulate_rows_multi(weights, heads, stride, plain_rows(codes, n).data(), n, accumulators, arithmetic);
}

const CodecBase* QuadRowsCodec::scattered_reader() const {
  return inner_->row_group() == 1 ? inner_.get() : nullptr;
}

void QuadRowsCodec::gather_rows(const CodeBuffer& codes, const uint32_t* rows, size_t n, uint8_t* out) const {
  const size_t bytes = code_bytes();
  for (size_t s = 0; s < n; ++s) {
    if (s + kRowsAhead < n) simd::prefetch_bytes(codes.row(rows[s + kRowsAhead] / 4 * 4), 4 * bytes);
    layout_.row(codes.data().data(), rows[s], out + s * bytes);
  }
}

}  // namespace kvsketch
