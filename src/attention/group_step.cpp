#include "attention/group_step.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attention/softmax_merge.hpp"
#include "core/require.hpp"
#include "simd/attention_kernels.hpp"

namespace kvsketch {
namespace {

constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

// Head h of `part` rescaled to the shared maximum `top`, added to (sum, acc).
void add_scaled(const Partials& part, size_t h, float top, float& sum, float* acc) {
  add_rescaled_piece(part.max[h], part.sum[h], part.head_acc(h), part.width, top, sum, acc);
}

// Turns logits (heads x n, row stride n) into weights in place and records max and sum per head.
void softmax_pieces(float* logits, size_t heads, size_t n, Partials& parts) {
  for (size_t h = 0; h < heads; ++h) {
    parts.max[h] = simd::max_value(logits + h * n, n);
    parts.sum[h] = simd::exp_shifted_sum(logits + h * n, n, parts.max[h]);
  }
}

// The first `n` floats of an item's scratch, grown (never shrunk) as steps need.
float* scratch_floats(std::vector<float>& scratch, size_t n) {
  if (scratch.size() < n) scratch.resize(n);
  return scratch.data();
}

// Exact attention pieces over fp16 rows, into `parts` (reset by the caller).
void half_rows_attention(const float* queries, size_t heads, const ExactPiece& piece, size_t dim, float scale,
                         Partials& parts, std::vector<float>& scratch) {
  if (piece.rows == 0) return;
  float* logits = scratch_floats(scratch, heads * piece.rows);
  if (piece.float_keys != nullptr) {  // a few decoded rows
    for (size_t h = 0; h < heads; ++h)
      for (size_t i = 0; i < piece.rows; ++i) {
        float dot = 0.0f;
        for (size_t j = 0; j < dim; ++j) dot += queries[h * dim + j] * piece.float_keys[i * dim + j];
        logits[h * piece.rows + i] = dot * scale;
      }
    softmax_pieces(logits, heads, piece.rows, parts);
    for (size_t h = 0; h < heads; ++h)
      for (size_t i = 0; i < piece.rows; ++i)
        for (size_t j = 0; j < dim; ++j) parts.acc[h * dim + j] += logits[h * piece.rows + i] * piece.float_values[i * dim + j];
    return;
  }
  simd::half_row_scores(queries, heads, piece.keys, piece.rows, dim, scale, logits, piece.rows);
  softmax_pieces(logits, heads, piece.rows, parts);
  simd::half_row_weighted_sum(logits, heads, piece.rows, piece.values, piece.rows, dim, parts.acc.data());
}

// Attention pieces over a task's segments, values left in the codec's accumulator domain, into
// `parts` (reset by the caller). Every query head of the group reads each code row once: in one
// pass where the codecs have a fused kernel (attend_segments), else scores_multi, the softmax, then
// accumulate_partial_multi. The prepared queries carry the logit scale.
void body_attention(const CodecBase& key_codec, const CodecBase& value_codec,
                    const std::vector<const PreparedQuery*>& prepared, const CodeSegment* task, size_t count,
                    Arithmetic arithmetic, Partials& parts, ItemScratch& scratch) {
  const size_t heads = prepared.size();
  size_t total = 0;
  for (size_t s = 0; s < count; ++s) total += task[s].rows;
  if (total == 0 || key_codec.attend_segments(prepared.data(), heads, value_codec, task, count, parts.max.data(),
                                              parts.sum.data(), parts.acc.data(), arithmetic, &scratch.attention))
    return;
  // The separate kernels where the fused one does not take them (no fused kernel, or rows in quads
  // that this CPU copies back): every segment's scores into one row of logits per head, one
  // softmax, then every segment's weighted sum, as over one range. Every logit is written by
  // scores_multi: no zeroing pass.
  float* logits = scratch_floats(scratch.logits, heads * total);
  size_t column = 0;
  for (size_t s = 0; s < count; ++s) {
    key_codec.scores_multi(prepared.data(), heads, *task[s].keys, task[s].first, task[s].rows, logits + column, total,
                           arithmetic);
    column += task[s].rows;
  }
  softmax_pieces(logits, heads, total, parts);
  column = 0;
  for (size_t s = 0; s < count; ++s) {
    value_codec.accumulate_partial_multi(logits + column, heads, total, *task[s].values, task[s].first, task[s].rows,
                                         parts.acc.data(), arithmetic);
    column += task[s].rows;
  }
}

// Cuts segments into tasks (body_tasks), calling emit(segment) for each piece and cut() at the end
// of each task.
template <typename Emit, typename Cut>
void cut_tasks(const CodeSegment* segments, size_t count, size_t tokens_per_task, size_t group, Emit&& emit,
               Cut&& cut) {
  constexpr size_t kMinSplitTokens = 2048;
  size_t total = 0;
  for (size_t s = 0; s < count; ++s) total += segments[s].rows;
  size_t target = std::max<size_t>(tokens_per_task, 1);
  if (total <= target && total >= kMinSplitTokens) target = (total + 1) / 2;
  target = (target + group - 1) / group * group;
  size_t rows = 0;  // of the open task
  bool open = false;
  for (size_t s = 0; s < count; ++s) {
    const CodeSegment& segment = segments[s];
    for (size_t first = 0; first < segment.rows;) {
      // A segment longer than a task is cut into ranges of one task each.
      const size_t piece = segment.rows > target ? std::min(target, segment.rows - first) : segment.rows;
      if (open && rows >= target) {
        cut();
        rows = 0;
      }
      open = true;
      emit(CodeSegment{segment.keys, segment.values, segment.first + first, piece});
      rows += piece;
      first += piece;
    }
  }
  if (open) cut();
}

}  // namespace

Partials::Partials(size_t heads, size_t width_) { reset(heads, width_); }

void Partials::reset(size_t heads, size_t width_) {
  width = width_;
  max.assign(heads, kMinusInfinity);
  sum.assign(heads, 0.0f);
  acc.assign(heads * width_, 0.0f);
}

PreparedQueries::PreparedQueries(const CodecBase& codec, const float* queries, size_t heads, float scale) {
  prepare(codec, queries, heads, scale);
}

void PreparedQueries::prepare(const CodecBase& codec, const float* queries, size_t heads, float scale) {
  scaled.resize(codec.dim());
  if (owned.size() < heads) owned.resize(heads);
  pointers.resize(heads);
  for (size_t h = 0; h < heads; ++h) {
    for (size_t j = 0; j < scaled.size(); ++j) scaled[j] = queries[h * codec.dim() + j] * scale;
    codec.prepare(scaled.data(), owned[h]);
    pointers[h] = owned[h].get();
  }
}

GroupStep::GroupStep(const CodecBase& key_codec, const CodecBase& value_codec, const float* queries,
                     size_t heads, std::vector<ExactPiece> exact, std::vector<std::vector<CodeSegment>> body,
                     Arithmetic arithmetic, std::vector<std::vector<float>> storage) {
  begin(key_codec, value_codec, queries, heads, arithmetic);
  exact_ = std::move(exact);
  storage_ = std::move(storage);
  for (const auto& task : body) {
    segments_.insert(segments_.end(), task.begin(), task.end());
    task_ends_.push_back(segments_.size());
  }
  finish();
}

void GroupStep::begin(const CodecBase& key_codec, const CodecBase& value_codec, const float* queries,
                      size_t heads, Arithmetic arithmetic) {
  key_codec_ = &key_codec;
  value_codec_ = &value_codec;
  queries_ = queries;
  heads_ = heads;
  dim_ = key_codec.dim();
  scale_ = 1.0f / std::sqrt(static_cast<float>(dim_));
  arithmetic_ = arithmetic;
  exact_.clear();
  segments_.clear();
  task_ends_.clear();
  storage_.clear();
}

void GroupStep::add_body(const CodeSegment* segments, size_t count, size_t tokens_per_task, size_t group) {
  cut_tasks(
      segments, count, tokens_per_task, group, [&](const CodeSegment& piece) { segments_.push_back(piece); },
      [&] { task_ends_.push_back(segments_.size()); });
}

void GroupStep::finish() {
  if (parts_.size() < items()) parts_.resize(items());
  if (scratch_.size() < items()) scratch_.resize(items());
  for (size_t i = 0; i < exact_.size(); ++i) parts_[i].reset(heads_, dim_);
  for (size_t t = 0; t < task_ends_.size(); ++t) parts_[exact_.size() + t].reset(heads_, value_codec_->accumulator_size());
  if (!task_ends_.empty()) prepared_.prepare(*key_codec_, queries_, heads_, scale_);
}

void GroupStep::run(size_t i) {
  if (i < exact_.size()) {
    half_rows_attention(queries_, heads_, exact_[i], dim_, scale_, parts_[i], scratch_[i].logits);
    return;
  }
  const size_t task = i - exact_.size(), first = task ? task_ends_[task - 1] : 0;
  body_attention(*key_codec_, *value_codec_, prepared_.pointers, segments_.data() + first, task_ends_[task] - first,
                 arithmetic_, parts_[i], scratch_[i]);
}

void GroupStep::merge(float* output, float* lse) {
  const size_t exact = exact_.size(), tasks = task_ends_.size();
  merge_acc_.resize(value_codec_->accumulator_size());
  for (size_t h = 0; h < heads_; ++h) {
    float* out = output + h * dim_;
    std::fill(out, out + dim_, 0.0f);
    float top = kMinusInfinity;
    for (size_t i = 0; i < exact + tasks; ++i) top = std::max(top, parts_[i].max[h]);
    if (empty_piece(top)) {
      lse[h] = kMinusInfinity;  // no tokens: output stays zero
      continue;
    }
    float sum = 0.0f;
    std::fill(merge_acc_.begin(), merge_acc_.end(), 0.0f);
    for (size_t t = 0; t < tasks; ++t) add_scaled(parts_[exact + t], h, top, sum, merge_acc_.data());
    if (tasks > 0) value_codec_->finish_accumulator(merge_acc_.data(), out);  // un-rotate once per head
    for (size_t i = 0; i < exact; ++i) add_scaled(parts_[i], h, top, sum, out);
    for (size_t j = 0; j < dim_; ++j) out[j] /= sum;
    lse[h] = merged_lse(top, sum);
  }
}

std::vector<std::vector<CodeSegment>> body_tasks(const std::vector<CodeSegment>& segments, size_t tokens_per_task,
                                                 size_t group) {
  std::vector<std::vector<CodeSegment>> tasks(1);
  cut_tasks(
      segments.data(), segments.size(), tokens_per_task, group,
      [&](const CodeSegment& piece) { tasks.back().push_back(piece); }, [&] { tasks.emplace_back(); });
  tasks.pop_back();
  return tasks;
}

// Visits the pieces of sinks and a window: the sinks, then the window in two halves.
template <typename Visit>
void visit_sink_and_window_pieces(const uint16_t* sink_keys, const uint16_t* sink_values, size_t sinks,
                                  const uint16_t* window_keys, const uint16_t* window_values, size_t window,
                                  size_t dim, Visit&& visit) {
  if (sinks > 0) visit(ExactPiece{sink_keys, sink_values, sinks});
  const size_t half = window / 2;
  if (half > 0) visit(ExactPiece{window_keys, window_values, half});
  if (window > half) visit(ExactPiece{window_keys + half * dim, window_values + half * dim, window - half});
}

void add_sink_and_window_pieces(GroupStep& step, const uint16_t* sink_keys, const uint16_t* sink_values, size_t sinks,
                                const uint16_t* window_keys, const uint16_t* window_values, size_t window,
                                size_t dim) {
  visit_sink_and_window_pieces(sink_keys, sink_values, sinks, window_keys, window_values, window, dim,
                               [&](const ExactPiece& piece) { step.add_exact(piece); });
}

std::vector<ExactPiece> sink_and_window_pieces(const uint16_t* sink_keys, const uint16_t* sink_values, size_t sinks,
                                               const uint16_t* window_keys, const uint16_t* window_values,
                                               size_t window, size_t dim) {
  std::vector<ExactPiece> pieces;
  visit_sink_and_window_pieces(sink_keys, sink_values, sinks, window_keys, window_values, window, dim,
                               [&](const ExactPiece& piece) { pieces.push_back(piece); });
  return pieces;
}

void run_steps(GroupStep* steps, size_t count, std::vector<std::pair<size_t, size_t>>& items, Executor& executor) {
  items.clear();
  for (size_t s = 0; s < count; ++s)
    for (size_t i = 0; i < steps[s].items(); ++i) items.emplace_back(s, i);
  struct Context {
    GroupStep* steps;
    const std::pair<size_t, size_t>* items;
  } context{steps, items.data()};
  executor.run(
      items.size(),
      [](void* raw, size_t k) {
        const auto& c = *static_cast<Context*>(raw);
        c.steps[c.items[k].first].run(c.items[k].second);
      },
      &context);
}

void run_steps(GroupStep* steps, size_t count, std::vector<std::pair<size_t, size_t>>& items,
               const AttentionOptions& options) {
  if (options.executor) return run_steps(steps, count, items, *options.executor);
  OpenMPExecutor executor(options.threads);
  run_steps(steps, count, items, executor);
}

void run_steps(std::vector<GroupStep>& steps, const AttentionOptions& options) {
  std::vector<std::pair<size_t, size_t>> items;
  run_steps(steps.data(), steps.size(), items, options);
}

void check_query_heads(const float* queries, size_t heads, size_t dim, const char* operation) {
  require(queries != nullptr, "{}: null queries", operation);
  require(heads >= 1, "{}: at least one query head is needed", operation);
  require_finite_rows(queries, heads, dim, "attention (queries: row = query head)");
}

}  // namespace kvsketch
