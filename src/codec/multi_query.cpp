// The multi-query path of CodecBase: the query heads of a GQA group share each decoded row.
#include <algorithm>
#include <vector>

#include "codec/attention_scratch.hpp"
#include "core/kernel_memory.hpp"
#include "codec/spec_of.hpp"
#include "codec/codec_base.hpp"
#include "core/require.hpp"
#include "simd/attention_kernels.hpp"
#include "simd/int_index_kernels.hpp"

namespace kvsketch {
namespace {

// Rows decoded per block: small enough that the floats stay in L1 while every head reads them,
// and whole row groups.
size_t block_rows(const VectorCodec& codec) {
  return (32 + codec.row_group() - 1) / codec.row_group() * codec.row_group();
}

}  // namespace

bool CodecBase::decode_domain_rows(const uint8_t*, size_t, float*, float*) const { return false; }

const float* CodecBase::domain_query(const PreparedQuery&) const { return nullptr; }

void CodecBase::scores_multi(const PreparedQuery* const* queries, size_t heads, const CodeBuffer& codes,
                               size_t first, size_t n, float* out, size_t stride, Arithmetic arithmetic) const {
  check_queries(queries, heads, "scores");
  require(stride >= n, "scores: output stride {} is less than the {} rows", stride, n);
  check_range(codes, first, n, "scores");
  if (n) score_rows_multi(queries, heads, codes.row(first), n, out, stride, arithmetic);
}

void CodecBase::accumulate_partial_multi(const float* weights, size_t heads, size_t stride, const CodeBuffer& codes,
                                           size_t first, size_t n, float* accumulators, Arithmetic arithmetic) const {
  require(stride >= n, "accumulate: weight stride {} is less than the {} rows", stride, n);
  check_range(codes, first, n, "accumulate");
  if (n) accumulate_rows_multi(weights, heads, stride, codes.row(first), n, accumulators, arithmetic);
}

void CodecBase::check_queries(const PreparedQuery* const* queries, size_t heads, const char* operation) const {
  for (size_t h = 0; h < heads; ++h)
    require(queries[h] != nullptr && queries[h]->owner == this,
            "{}: query {} was prepared by a different codec than {}", operation, h, SpecOf{*this});
}

namespace {

// Without the caller's memory, attend_segments takes this thread's of earlier calls (the kernels it
// calls never call it again on the same thread). Its own function: a thread-local is built where
// its declaration is first passed, and building one allocates (the parts' deques).
AttentionScratch& thread_attention_scratch() {
  thread_local AttentionScratch memory;
  return memory;
}

}  // namespace

bool CodecBase::attend_multi(const PreparedQuery* const* queries, size_t heads, const CodeBuffer& keys,
                               const CodecBase& value_codec, const CodeBuffer& values, size_t first, size_t n,
                               float* max, float* sum, float* accumulators, Arithmetic arithmetic) const {
  const CodeSegment segment{&keys, &values, first, n};
  return attend_segments(queries, heads, value_codec, &segment, 1, max, sum, accumulators, arithmetic, nullptr);
}

bool CodecBase::attend_segments(const PreparedQuery* const* queries, size_t heads, const CodecBase& value_codec,
                                  const CodeSegment* segments, size_t count, float* max, float* sum,
                                  float* accumulators, Arithmetic arithmetic, AttentionScratch* memory) const {
  check_queries(queries, heads, "attention");
  AttentionScratch& scratch = memory ? *memory : thread_attention_scratch();
  std::vector<const CodeSegment*>& live = scratch.live;
  live.clear();
  for (size_t s = 0; s < count; ++s) {
    const CodeSegment& segment = segments[s];
    require(segment.keys != nullptr && segment.values != nullptr, "attention: segment {} has null codes", s);
    check_range(*segment.keys, segment.first, segment.rows, "attention (keys)");
    value_codec.check_range(*segment.values, segment.first, segment.rows, "attention (values)");
    if (segment.rows > 0) live.push_back(&segment);
  }
  if (live.empty() || arithmetic != Arithmetic::kInteger) return false;
  const uint8_t* key_base = live[0]->keys->row(live[0]->first);
  const uint8_t* value_base = live[0]->values->row(live[0]->first);
  AttentionParts& key_view = scratch.key_view;
  AttentionParts& value_view = scratch.value_view;
  key_view.reset();
  value_view.reset();
  if (!key_parts(key_base, queries, heads, key_view) ||
      !value_codec.value_parts(value_base, accumulators, value_codec.accumulator_size(), value_view))
    return false;
  // Each segment's rows as a shift from the first's (the parts point into the first segment).
  const auto shift = [](const uint8_t* to, const uint8_t* from) {
    return static_cast<std::ptrdiff_t>(reinterpret_cast<uintptr_t>(to) - reinterpret_cast<uintptr_t>(from));
  };
  scratch.rows.clear();
  scratch.key_shift.clear();
  scratch.value_shift.clear();
  for (const CodeSegment* segment : live) {
    scratch.rows.push_back(segment->rows);
    scratch.key_shift.push_back(shift(segment->keys->row(segment->first), key_base));
    scratch.value_shift.push_back(shift(segment->values->row(segment->first), value_base));
  }
  const simd::RowSegments row_segments{live.size(), scratch.rows.data(), scratch.key_shift.data(),
                                       scratch.value_shift.data()};
  if (!simd::int_index_attention_segments(key_view.keys(scratch.groups), value_view.parts.data(),
                                          value_view.parts.size(), row_segments, heads, max, sum))
    return false;
  for (float* slot : value_view.weight_sums)
    for (size_t h = 0; h < heads; ++h) slot[h * value_view.weight_sum_stride] = sum[h];
  return true;
}

void CodecBase::score_rows_one_head(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const {
  const PreparedQuery* queries[1] = {&q};
  score_rows_multi(queries, 1, codes, n, out, n, Arithmetic::kFloat);
}

void CodecBase::accumulate_rows_one_head(const float* weights, const uint8_t* codes, size_t n,
                                           float* accumulator) const {
  accumulate_rows_multi(weights, 1, n, codes, n, accumulator, Arithmetic::kFloat);
}

void CodecBase::score_rows_multi(const PreparedQuery* const* queries, size_t heads, const uint8_t* codes, size_t n,
                                   float* out, size_t stride, Arithmetic) const {
  const size_t width = accumulator_size(), block = block_rows(*this);
  KernelVector<float> rows(block * width), row_scale(block);
  if (!decode_domain_rows(codes, 0, rows.data(), row_scale.data())) {
    for (size_t h = 0; h < heads; ++h) score_rows(*queries[h], codes, n, out + h * stride);
    return;
  }
  KernelVector<float> stacked(heads * width);
  for (size_t h = 0; h < heads; ++h) std::copy_n(domain_query(*queries[h]), width, stacked.data() + h * width);
  for (size_t start = 0; start < n; start += block) {
    const size_t count = std::min(block, n - start);
    decode_domain_rows(codes + start * code_bytes(), count, rows.data(), row_scale.data());
    simd::float_row_scores(stacked.data(), heads, rows.data(), count, width, 1.0f, out + start, stride);
    for (size_t h = 0; h < heads; ++h)
      for (size_t i = 0; i < count; ++i) out[h * stride + start + i] *= row_scale[i];
  }
}

void CodecBase::accumulate_rows_multi(const float* weights, size_t heads, size_t stride, const uint8_t* codes,
                                        size_t n, float* accumulators, Arithmetic) const {
  const size_t width = accumulator_size(), block = block_rows(*this);
  KernelVector<float> rows(block * width), row_scale(block);
  if (!decode_domain_rows(codes, 0, rows.data(), row_scale.data())) {
    for (size_t h = 0; h < heads; ++h) accumulate_rows(weights + h * stride, codes, n, accumulators + h * width);
    return;
  }
  KernelVector<float> scaled(heads * block);
  for (size_t start = 0; start < n; start += block) {
    const size_t count = std::min(block, n - start);
    decode_domain_rows(codes + start * code_bytes(), count, rows.data(), row_scale.data());
    for (size_t h = 0; h < heads; ++h)
      for (size_t i = 0; i < count; ++i) scaled[h * block + i] = weights[h * stride + start + i] * row_scale[i];
    simd::float_row_weighted_sum(scaled.data(), heads, block, rows.data(), count, width, accumulators);
  }
}

}  // namespace kvsketch
