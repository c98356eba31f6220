// CodecBase's row layout (kvsketch/row_layout.hpp) and its reading into the fused kernel's parts:
// the one place where the kernels learn what a codec's rows hold. The layout is data; which
// kernel runs follows from its shape (one key part and one value part, or several) and from the
// CPU (Highway's dispatch in simd/int_index_kernels.cpp).
#include <algorithm>

#include "codec/attention_parts.hpp"
#include "codec/codec_base.hpp"
#include "codec/spec_of.hpp"
#include "core/require.hpp"

namespace kvsketch {
namespace {

// A layout part over rows from `codes` on: the kernel's view, pointing into the layout's table.
simd::AttentionPart bound_part(const RowLayout& layout, const RowLayout::Part& part, const uint8_t* codes) {
  const size_t spread = layout.quads ? 4 : 1;  // a field at offset o of a row lies at 4 o of its quad
  simd::AttentionPart out;
  out.rows = {simd::RowFormat::kIndex,
              codes + spread * part.indices.offset,
              layout.row_bytes,
              part.indices.count,
              part.indices.bits,
              part.indices.table.data(),
              layout.row_bytes - part.indices.offset};
  out.rows.quads = layout.quads;
  if (part.factor) out.factor = simd::RowFactor{part.factor->offset - part.indices.offset, part.factor->half};
  out.scale = part.scale;
  return out;
}

}  // namespace

const RowLayout& CodecBase::row_layout() const {
  std::call_once(layout_once_, [&] { describe_row(layout_); });
  return layout_;
}

void CodecBase::describe_row(RowLayout& layout) const {
  layout.row_bytes = code_bytes();
  layout.fields = {{0, code_bytes(), code_bytes()}};
}

void CodecBase::key_domain(const PreparedQuery&, float*) const {
  throw Error(fmt::format("codec {} has no key form for the fused kernels", SpecOf{*this}));
}

float CodecBase::key_shift(const PreparedQuery&) const { return 0.0f; }

bool CodecBase::key_parts(const uint8_t* codes, const PreparedQuery* const* queries, size_t heads,
                          AttentionParts& parts) const {
  const RowLayout& layout = row_layout();
  if (!layout.has_keys || (layout.key_shift && !parts.score_shift.empty())) return false;
  // Each head's query in the keys' domain, then each part's coordinates of it, head after head.
  std::vector<float>& domain = parts.next_query(heads * layout.key_domain);
  for (size_t h = 0; h < heads; ++h) key_domain(*queries[h], domain.data() + h * layout.key_domain);
  const size_t first = parts.parts.size();
  for (const RowLayout::Part& part : layout.key_parts) {
    const size_t count = part.indices.count;
    std::vector<float>& part_queries = parts.next_query(heads * count);
    for (size_t h = 0; h < heads; ++h)
      std::copy_n(domain.data() + h * layout.key_domain + part.domain, count, part_queries.data() + h * count);
    parts.parts.push_back(bound_part(layout, part, codes));
    parts.parts.back().queries = part_queries.data();
  }
  for (const RowLayout::KeyGroup& group : layout.key_groups) {
    std::optional<simd::RowFactor> factor;
    if (group.factor) {  // from the group's first part's rows
      const size_t base = layout.key_parts[group.first].indices.offset;
      factor = simd::RowFactor{group.factor->offset - base, group.factor->half};
    }
    parts.groups.push_back({first + group.first, group.count, factor});
  }
  if (layout.key_shift)
    for (size_t h = 0; h < heads; ++h) parts.score_shift.push_back(key_shift(*queries[h]));
  return true;
}

bool CodecBase::value_parts(const uint8_t* codes, float* accumulators, size_t stride, AttentionParts& parts) const {
  const RowLayout& layout = row_layout();
  if (!layout.has_values) return false;
  if (!layout.weight_sums.empty() && !parts.weight_sums.empty() && parts.weight_sum_stride != stride) return false;
  for (const RowLayout::Part& part : layout.value_parts) {
    parts.parts.push_back(bound_part(layout, part, codes));
    parts.parts.back().acc = accumulators + part.domain;
    parts.parts.back().acc_stride = stride;
  }
  for (const size_t slot : layout.weight_sums) {
    parts.weight_sums.push_back(accumulators + slot);
    parts.weight_sum_stride = stride;
  }
  return true;
}

}  // namespace kvsketch
