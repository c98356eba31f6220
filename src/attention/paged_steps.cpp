#include "attention/paged_steps.hpp"

#include <algorithm>
#include <numeric>

namespace kvsketch {

namespace {

// The code rows [first, last) of KV head g, in the pages of `rows`, as segments (into `segments`,
// cleared first).
void page_segments(const SequenceLayer& rows, size_t g, size_t first, size_t last, std::vector<CodeSegment>& segments) {
  segments.clear();
  size_t start = 0;  // the first row of the page
  for (const auto& page : rows.pages) {
    const size_t end = start + page->rows(), from = std::max(first, start), to = std::min(last, end);
    if (from < to) segments.push_back({&page->keys[g], &page->values[g], from - start, to - from});
    start = end;
  }
}

std::vector<CodeSegment> page_segments(const SequenceLayer& rows, size_t g, size_t first, size_t last) {
  std::vector<CodeSegment> segments;
  page_segments(rows, g, first, last, segments);
  return segments;
}

// Rows [first, last) of KV head g, all within one row group starting at group_first, decoded to
// floats as an exact piece of the step (which keeps the floats).
void decoded_piece(const CodecBase& key_codec, const CodecBase& value_codec, const SequenceLayer& rows, size_t g,
                   size_t group_first, size_t group, size_t first, size_t last, GroupStep& step) {
  const size_t d = key_codec.dim();
  const std::vector<CodeSegment> where = page_segments(rows, g, group_first, group_first + group);
  std::vector<float> keys(group * d), values(group * d);
  key_codec.decode(*where.front().keys, where.front().first, group, keys.data());
  value_codec.decode(*where.front().values, where.front().first, group, values.data());
  keys.erase(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>((first - group_first) * d));
  values.erase(values.begin(), values.begin() + static_cast<std::ptrdiff_t>((first - group_first) * d));
  step.add_exact({nullptr, nullptr, last - first, keys.data(), values.data()});
  step.keep(std::move(keys));  // moved, the buffers (and the piece's pointers) stay
  step.keep(std::move(values));
}

}  // namespace

void paged_group_items(GroupStep& step, std::vector<CodeSegment>& segments, const CodecBase& key_codec,
                       const CodecBase& value_codec, const SequenceLayer& rows, size_t g, TokenRange range,
                       const float* queries, size_t heads, const AttentionOptions& options) {
  const HeadRows& head = rows.heads[g];
  const size_t d = key_codec.dim(), begin = range.first, end = range.first + range.count;
  // The range in each part: sinks, then body rows, then window rows, in token order.
  const auto part = [&](size_t first_token, size_t tokens) -> std::pair<size_t, size_t> {
    const auto clip = [&](size_t t) { return std::clamp(t, first_token, first_token + tokens) - first_token; };
    return {clip(begin), clip(end)};
  };
  const auto [s0, s1] = part(0, head.sinks);
  const auto [b0, b1] = part(head.sinks, rows.body);
  const auto [w0, w1] = part(head.sinks + rows.body, head.window);
  const size_t live = head.retained + w0;  // the window's tokens not yet encoded start at retained
  step.begin(key_codec, value_codec, queries, heads, options.arithmetic);
  add_sink_and_window_pieces(step, head.sink_keys.data() + s0 * d, head.sink_values.data() + s0 * d, s1 - s0,
                             head.window_keys.data() + live * d, head.window_values.data() + live * d, w1 - w0, d);
  // The codes are read in whole row groups (quads, KIVI's groups): a range that starts or ends
  // inside one (a prefill's position, a plan's range) reads those rows decoded instead.
  const size_t group = std::lcm(key_codec.row_group(), value_codec.row_group());
  size_t whole_first = (b0 + group - 1) / group * group, whole_last = b1 / group * group;
  if (b0 < b1 && whole_first >= whole_last) {  // within one group
    decoded_piece(key_codec, value_codec, rows, g, b0 / group * group, group, b0, b1, step);
    whole_first = whole_last = b1;
  } else if (b0 < b1) {
    if (b0 < whole_first) decoded_piece(key_codec, value_codec, rows, g, whole_first - group, group, b0, whole_first, step);
    if (whole_last < b1) decoded_piece(key_codec, value_codec, rows, g, whole_last, group, whole_last, b1, step);
  }
  segments.clear();
  if (whole_first < whole_last) page_segments(rows, g, whole_first, whole_last, segments);
  step.add_body(segments.data(), segments.size(), options.tokens_per_task, group);
}

void paged_group_step(GroupStep& step, std::vector<CodeSegment>& segments, const CodecBase& key_codec,
                      const CodecBase& value_codec, const SequenceLayer& rows, size_t g, TokenRange range,
                      const float* queries, size_t heads, const AttentionOptions& options) {
  paged_group_items(step, segments, key_codec, value_codec, rows, g, range, queries, heads, options);
  step.finish();
}

std::vector<TokenRange> paged_plan(const CodecBase& key_codec, const CodecBase& value_codec,
                                   const SequenceLayer& rows, const AttentionOptions& options) {
  const HeadRows& head = rows.heads.front();
  std::vector<TokenRange> ranges;
  if (head.sinks > 0) ranges.push_back({0, head.sinks});
  const size_t window_first = head.sinks + rows.body, half = head.window / 2;
  if (half > 0) ranges.push_back({window_first, half});
  if (head.window > half) ranges.push_back({window_first + half, head.window - half});
  const size_t group = std::lcm(key_codec.row_group(), value_codec.row_group());
  for (const auto& task : body_tasks(page_segments(rows, 0, 0, rows.body), options.tokens_per_task, group)) {
    size_t rows_before = 0;  // of the task's first segment's page
    for (const auto& page : rows.pages) {
      if (&page->keys[0] == task.front().keys) break;
      rows_before += page->rows();
    }
    size_t count = 0;
    for (const CodeSegment& segment : task) count += segment.rows;
    ranges.push_back({head.sinks + rows_before + task.front().first, count});
  }
  return ranges;
}

}  // namespace kvsketch
