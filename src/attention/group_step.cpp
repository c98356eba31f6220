#include "attention/group_step.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/require.hpp"
#include "simd/attention_kernels.hpp"

namespace kvsketch {
namespace {

constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

// Rescales head h of `part` to the shared maximum `top` and adds it to (sum, acc).
void add_scaled(const Partials& part, size_t h, float top, float& sum, float* acc) {
  if (part.sum[h] == 0.0f) return;
  const float factor = std::exp(part.max[h] - top);
  sum += part.sum[h] * factor;
  const float* from = part.head_acc(h);
  for (size_t j = 0; j < part.width; ++j) acc[j] += factor * from[j];
}

// Turns logits (heads x n, row stride n) into weights in place and records max and sum per head.
void softmax_pieces(float* logits, size_t heads, size_t n, Partials& parts) {
  for (size_t h = 0; h < heads; ++h) {
    parts.max[h] = simd::max_value(logits + h * n, n);
    parts.sum[h] = simd::exp_shifted_sum(logits + h * n, n, parts.max[h]);
  }
}

// Exact attention pieces over fp16 rows.
Partials half_rows_attention(const float* queries, size_t heads, const ExactPiece& piece, size_t dim, float scale) {
  Partials parts(heads, dim);
  if (piece.rows == 0) return parts;
  std::vector<float> logits(heads * piece.rows);
  if (piece.float_keys != nullptr) {  // a few decoded rows
    for (size_t h = 0; h < heads; ++h)
      for (size_t i = 0; i < piece.rows; ++i) {
        float dot = 0.0f;
        for (size_t j = 0; j < dim; ++j) dot += queries[h * dim + j] * piece.float_keys[i * dim + j];
        logits[h * piece.rows + i] = dot * scale;
      }
    softmax_pieces(logits.data(), heads, piece.rows, parts);
    for (size_t h = 0; h < heads; ++h)
      for (size_t i = 0; i < piece.rows; ++i)
        for (size_t j = 0; j < dim; ++j)
          parts.acc[h * dim + j] += logits[h * piece.rows + i] * piece.float_values[i * dim + j];
    return parts;
  }
  simd::half_row_scores(queries, heads, piece.keys, piece.rows, dim, scale, logits.data(), piece.rows);
  softmax_pieces(logits.data(), heads, piece.rows, parts);
  simd::half_row_weighted_sum(logits.data(), heads, piece.rows, piece.values, piece.rows, dim, parts.acc.data());
  return parts;
}

// Attention pieces over code rows, values left in the codec's accumulator domain. Every query head
// of the group reads each code row once: in one pass where the codecs have a fused kernel
// (attend_multi), else scores_multi, the softmax, then accumulate_partial_multi. The prepared
// queries carry the logit scale.
// Attention pieces over one segment, by the fused kernel where the codecs have one, else by the
// separate ones.
Partials segment_attention(const VectorCodec& key_codec, const VectorCodec& value_codec,
                           const std::vector<const PreparedQuery*>& prepared, const CodeSegment& segment,
                           Arithmetic arithmetic) {
  const size_t heads = prepared.size(), n = segment.rows;
  Partials parts(heads, value_codec.accumulator_size());
  if (n == 0 || key_codec.attend_segments(prepared.data(), heads, value_codec, &segment, 1, parts.max.data(),
                                          parts.sum.data(), parts.acc.data(), arithmetic))
    return parts;
  // Every logit is written by scores_multi: no zeroing pass over the task's heads x n floats.
  const auto logits = std::make_unique_for_overwrite<float[]>(heads * n);
  key_codec.scores_multi(prepared.data(), heads, *segment.keys, segment.first, n, logits.get(), n, arithmetic);
  softmax_pieces(logits.get(), heads, n, parts);
  value_codec.accumulate_partial_multi(logits.get(), heads, n, *segment.values, segment.first, n, parts.acc.data(),
                                       arithmetic);
  return parts;
}

// Attention pieces over a task's segments, values left in the codec's accumulator domain. Every
// query head of the group reads each code row once: in one pass where the codecs have a fused
// kernel (attend_segments), else scores_multi, the softmax, then accumulate_partial_multi. The
// prepared queries carry the logit scale.
Partials body_attention(const VectorCodec& key_codec, const VectorCodec& value_codec,
                        const std::vector<const PreparedQuery*>& prepared, const std::vector<CodeSegment>& task,
                        Arithmetic arithmetic) {
  if (task.size() == 1) return segment_attention(key_codec, value_codec, prepared, task.front(), arithmetic);
  const size_t heads = prepared.size();
  Partials parts(heads, value_codec.accumulator_size());
  if (key_codec.attend_segments(prepared.data(), heads, value_codec, task.data(), task.size(), parts.max.data(),
                                parts.sum.data(), parts.acc.data(), arithmetic))
    return parts;
  // The separate kernels where the fused one does not take them together (no fused kernel, or rows
  // in quads that this CPU copies back): every segment's scores into one row of logits per head, one
  // softmax, then every segment's weighted sum, as over one range.
  size_t total = 0;
  for (const CodeSegment& segment : task) total += segment.rows;
  const auto logits = std::make_unique_for_overwrite<float[]>(heads * total);
  size_t column = 0;
  for (const CodeSegment& segment : task) {
    key_codec.scores_multi(prepared.data(), heads, *segment.keys, segment.first, segment.rows, logits.get() + column,
                           total, arithmetic);
    column += segment.rows;
  }
  softmax_pieces(logits.get(), heads, total, parts);
  column = 0;
  for (const CodeSegment& segment : task) {
    value_codec.accumulate_partial_multi(logits.get() + column, heads, total, *segment.values, segment.first,
                                         segment.rows, parts.acc.data(), arithmetic);
    column += segment.rows;
  }
  return parts;
}

}  // namespace

Partials::Partials(size_t heads, size_t width_)
    : width(width_), max(heads, kMinusInfinity), sum(heads), acc(heads * width_) {}

PreparedQueries::PreparedQueries(const VectorCodec& codec, const float* queries, size_t heads, float scale) {
  std::vector<float> scaled(codec.dim());
  for (size_t h = 0; h < heads; ++h) {
    for (size_t j = 0; j < scaled.size(); ++j) scaled[j] = queries[h * codec.dim() + j] * scale;
    owned.push_back(codec.prepare(scaled.data()));
    pointers.push_back(owned.back().get());
  }
}

GroupStep::GroupStep(const VectorCodec& key_codec, const VectorCodec& value_codec, const float* queries,
                     size_t heads, std::vector<ExactPiece> exact, std::vector<std::vector<CodeSegment>> body,
                     Arithmetic arithmetic, std::vector<std::vector<float>> storage)
    : key_codec_(key_codec), value_codec_(value_codec), queries_(queries), heads_(heads), dim_(key_codec.dim()),
      scale_(1.0f / std::sqrt(static_cast<float>(dim_))), arithmetic_(arithmetic), exact_(std::move(exact)),
      storage_(std::move(storage)),
      body_(std::move(body)), exact_parts_(exact_.size()), body_parts_(body_.size()) {
  if (!body_.empty()) prepared_ = std::make_unique<const PreparedQueries>(key_codec_, queries, heads, scale_);
}

void GroupStep::run(size_t i) {
  if (i < exact_.size()) {
    exact_parts_[i] = half_rows_attention(queries_, heads_, exact_[i], dim_, scale_);
    return;
  }
  const size_t range = i - exact_.size();
  body_parts_[range] = body_attention(key_codec_, value_codec_, prepared_->pointers, body_[range], arithmetic_);
}

void GroupStep::merge(float* output, float* lse) const {
  std::vector<float> body_acc(value_codec_.accumulator_size());
  for (size_t h = 0; h < heads_; ++h) {
    float* out = output + h * dim_;
    std::fill(out, out + dim_, 0.0f);
    float top = kMinusInfinity;
    for (const auto& parts : exact_parts_) top = std::max(top, parts.max[h]);
    for (const auto& parts : body_parts_) top = std::max(top, parts.max[h]);
    if (top == kMinusInfinity) {
      lse[h] = kMinusInfinity;  // no tokens: output stays zero
      continue;
    }
    float sum = 0.0f;
    std::fill(body_acc.begin(), body_acc.end(), 0.0f);
    for (const auto& parts : body_parts_) add_scaled(parts, h, top, sum, body_acc.data());
    if (!body_parts_.empty()) value_codec_.finish_accumulator(body_acc.data(), out);  // un-rotate once per head
    for (const auto& parts : exact_parts_) add_scaled(parts, h, top, sum, out);
    for (size_t j = 0; j < dim_; ++j) out[j] /= sum;
    lse[h] = top + std::log(sum);
  }
}

std::vector<std::vector<CodeSegment>> body_tasks(const std::vector<CodeSegment>& segments, size_t tokens_per_task,
                                                 size_t group) {
  constexpr size_t kMinSplitTokens = 2048;
  size_t total = 0;
  for (const CodeSegment& segment : segments) total += segment.rows;
  size_t target = std::max<size_t>(tokens_per_task, 1);
  if (total <= target && total >= kMinSplitTokens) target = (total + 1) / 2;
  target = (target + group - 1) / group * group;
  std::vector<std::vector<CodeSegment>> tasks;
  size_t rows = 0;  // of the last task
  for (const CodeSegment& segment : segments)
    for (size_t first = 0; first < segment.rows;) {
      // A segment longer than a task is cut into ranges of one task each.
      const size_t count = segment.rows > target ? std::min(target, segment.rows - first) : segment.rows;
      if (tasks.empty() || rows >= target) {
        tasks.emplace_back();
        rows = 0;
      }
      tasks.back().push_back({segment.keys, segment.values, segment.first + first, count});
      rows += count;
      first += count;
    }
  return tasks;
}

std::vector<ExactPiece> sink_and_window_pieces(const uint16_t* sink_keys, const uint16_t* sink_values, size_t sinks,
                                               const uint16_t* window_keys, const uint16_t* window_values,
                                               size_t window, size_t dim) {
  std::vector<ExactPiece> pieces;
  if (sinks > 0) pieces.push_back({sink_keys, sink_values, sinks});
  const size_t half = window / 2;
  if (half > 0) pieces.push_back({window_keys, window_values, half});
  if (window > half) pieces.push_back({window_keys + half * dim, window_values + half * dim, window - half});
  return pieces;
}

void run_steps(std::vector<GroupStep>& steps, Executor& executor) {
  struct Items {
    std::vector<GroupStep>* steps;
    std::vector<std::pair<size_t, size_t>> list;  // (step, item)
  } items{&steps, {}};
  for (size_t s = 0; s < steps.size(); ++s)
    for (size_t i = 0; i < steps[s].items(); ++i) items.list.emplace_back(s, i);
  executor.run(
      items.list.size(),
      [](void* context, size_t k) {
        auto& all = *static_cast<Items*>(context);
        (*all.steps)[all.list[k].first].run(all.list[k].second);
      },
      &items);
}

void run_steps(std::vector<GroupStep>& steps, const AttentionOptions& options) {
  if (options.executor) return run_steps(steps, *options.executor);
  OpenMPExecutor executor(options.threads);
  run_steps(steps, executor);
}

void check_query_heads(const float* queries, size_t heads, size_t dim, const char* operation) {
  require(queries != nullptr, "{}: null queries", operation);
  require(heads >= 1, "{}: at least one query head is needed", operation);
  require_finite_rows(queries, heads, dim, "attention (queries: row = query head)");
}

}  // namespace kvsketch
