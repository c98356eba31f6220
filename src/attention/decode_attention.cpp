#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>

#include "core/team_size.hpp"
#include "kvsketch/attention.hpp"
#include "kvsketch/error.hpp"
#include "simd/attention_kernels.hpp"

namespace kvsketch {
namespace {

constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

// Softmax pieces of the query heads over some tokens: per head the max logit, the sum of
// exp(logit - max), and the exp-weighted sum of values (width floats, in whatever domain the
// values are accumulated), so that parts merge exactly. One allocation per field, not per head.
struct Partials {
  size_t width = 0;
  std::vector<float> max, sum, acc;  // acc: head h at h * width
  Partials() = default;
  Partials(size_t heads, size_t width_) : width(width_), max(heads, kMinusInfinity), sum(heads), acc(heads * width_) {}
  const float* head_acc(size_t h) const { return acc.data() + h * width; }
};

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
Partials half_rows_attention(const float* queries, size_t heads, const uint16_t* keys, const uint16_t* values,
                             size_t n, size_t dim, float scale) {
  Partials parts(heads, dim);
  if (n == 0) return parts;
  std::vector<float> logits(heads * n);
  simd::half_row_scores(queries, heads, keys, n, dim, scale, logits.data(), n);
  softmax_pieces(logits.data(), heads, n, parts);
  simd::half_row_weighted_sum(logits.data(), heads, n, values, n, dim, parts.acc.data());
  return parts;
}

// Attention pieces over body rows [first, first + n), values left in the codec's accumulator domain.
// Every query head of the group reads each code row once: in one pass where the codecs have a fused
// kernel (attend_multi), else scores_multi, the softmax, then accumulate_partial_multi. The
// prepared queries carry the logit scale.
Partials body_attention(const VectorCodec& key_codec, const VectorCodec& value_codec,
                        const std::vector<const PreparedQuery*>& prepared, const HeadCache& head, size_t first,
                        size_t n, Arithmetic arithmetic) {
  const size_t heads = prepared.size();
  Partials parts(heads, value_codec.accumulator_size());
  if (key_codec.attend_multi(prepared.data(), heads, head.body_keys, value_codec, head.body_values, first, n,
                             parts.max.data(), parts.sum.data(), parts.acc.data(), arithmetic))
    return parts;
  // Every logit is written by scores_multi: no zeroing pass over the task's heads x n floats.
  const auto logits = std::make_unique_for_overwrite<float[]>(heads * n);
  key_codec.scores_multi(prepared.data(), heads, head.body_keys, first, n, logits.get(), n, arithmetic);
  softmax_pieces(logits.get(), heads, n, parts);
  value_codec.accumulate_partial_multi(logits.get(), heads, n, head.body_values, first, n, parts.acc.data(),
                                       arithmetic);
  return parts;
}

// Each query head times the logit scale, prepared once for the codec (rotated, sketched, tables
// built): every estimator is linear in the query, so its scores come out scaled.
struct PreparedQueries {
  std::vector<std::unique_ptr<PreparedQuery>> owned;
  std::vector<const PreparedQuery*> pointers;
  PreparedQueries(const VectorCodec& codec, const float* queries, size_t heads, float scale) {
    std::vector<float> scaled(codec.dim());
    for (size_t h = 0; h < heads; ++h) {
      for (size_t j = 0; j < scaled.size(); ++j) scaled[j] = queries[h * codec.dim() + j] * scale;
      owned.push_back(codec.prepare(scaled.data()));
      pointers.push_back(owned.back().get());
    }
  }
};

// Tokens per range of the body. Each kernel call costs a few microseconds besides its rows, so
// ranges are long (tokens_per_task at most), but a body that would fit one range is split in two
// from kMinSplitTokens on, so that two threads share a short context too. Ranges start on whole row
// groups of both codecs (KIVI keys share scales over a group). The split depends on the body and
// the options only, never on the thread count: the merged answer is the same bits on any.
constexpr size_t kMinSplitTokens = 2048;
size_t task_tokens(size_t body, size_t tokens_per_task, size_t group) {
  size_t tokens = std::max<size_t>(tokens_per_task, 1);
  if (body <= tokens && body >= kMinSplitTokens) tokens = (body + 1) / 2;
  return (tokens + group - 1) / group * group;
}

// Rows of the exact fp16 part: the sinks, then the recent window in two halves. The halves run
// beside each other and beside the body ranges, so that two threads share the window's reads
// (cold in a decode step: about 10 us of a 140 us two-thread step at 16k tokens when it ran alone
// before the body). The split depends on the window's length only, never on the thread count.
struct ExactPiece {
  const uint16_t* keys;
  const uint16_t* values;
  size_t rows;
};
std::vector<ExactPiece> exact_pieces(const HeadCache& head, size_t dim) {
  std::vector<ExactPiece> pieces;
  if (head.sink_count > 0) pieces.push_back({head.sink_keys.data(), head.sink_values.data(), head.sink_count});
  const size_t half = head.window_count / 2;
  if (half > 0) pieces.push_back({head.window_keys.data(), head.window_values.data(), half});
  if (head.window_count > half)
    pieces.push_back({head.window_keys.data() + half * dim, head.window_values.data() + half * dim,
                      head.window_count - half});
  return pieces;
}

void check_queries(const KVCache& cache, size_t layer, const float* queries, size_t heads,
                   const AttentionOptions& options) {
  check_threads(options.threads, "attention");
  require(queries != nullptr, "attention: null queries");
  require(heads >= 1, "attention: at least one query head is needed");
  require(layer < cache.layers(), "attention: layer {} out of range; the cache has {} layers", layer, cache.layers());
  require_finite_rows(queries, heads, cache.head_dim(), "attention (queries: row = query head)");
}

// One GQA group's decode step in three phases: its items (the exact fp16 pieces, then the body's
// token ranges), each run by any thread, and their merge in a fixed order. The items depend on the
// cache and the options only, so the merged answer has the same bits on any number of threads.
class GroupStep {
 public:
  GroupStep(const KVCache& cache, size_t layer, size_t kv_head, const float* queries, size_t heads,
            const AttentionOptions& options)
      : head_(cache.head(layer, kv_head)), key_codec_(cache.key_codec(layer, kv_head)),
        value_codec_(cache.value_codec(layer, kv_head)), queries_(queries), heads_(heads), dim_(cache.head_dim()),
        scale_(1.0f / std::sqrt(static_cast<float>(dim_))), arithmetic_(options.arithmetic),
        exact_(exact_pieces(head_, dim_)), body_(head_.body_count()),
        per_task_(task_tokens(body_, options.tokens_per_task,
                              std::lcm(key_codec_.row_group(), value_codec_.row_group()))),
        exact_parts_(exact_.size()), task_parts_((body_ + per_task_ - 1) / per_task_) {
    if (!task_parts_.empty()) prepared_ = std::make_unique<const PreparedQueries>(key_codec_, queries, heads, scale_);
  }

  size_t items() const { return exact_.size() + task_parts_.size(); }

  // Item i's partial sums; distinct items may run at once.
  void run(size_t i) {
    if (i < exact_.size()) {
      const ExactPiece& piece = exact_[i];
      exact_parts_[i] = half_rows_attention(queries_, heads_, piece.keys, piece.values, piece.rows, dim_, scale_);
      return;
    }
    const size_t task = i - exact_.size(), first = task * per_task_;
    task_parts_[task] = body_attention(key_codec_, value_codec_, prepared_->pointers, head_, first,
                                       std::min(per_task_, body_ - first), arithmetic_);
  }

  // The items' partial sums merged by log-sum-exp, in item order.
  AttentionResult merge() const {
    AttentionResult result{heads_, dim_, std::vector<float>(heads_ * dim_, 0.0f), std::vector<float>(heads_)};
    std::vector<float> body_acc(value_codec_.accumulator_size());
    for (size_t h = 0; h < heads_; ++h) {
      float top = kMinusInfinity;
      for (const auto& parts : exact_parts_) top = std::max(top, parts.max[h]);
      for (const auto& parts : task_parts_) top = std::max(top, parts.max[h]);
      if (top == kMinusInfinity) {
        result.lse[h] = kMinusInfinity;  // no tokens: output stays zero
        continue;
      }
      float sum = 0.0f;
      std::fill(body_acc.begin(), body_acc.end(), 0.0f);
      for (const auto& parts : task_parts_) add_scaled(parts, h, top, sum, body_acc.data());
      float* out = result.output.data() + h * dim_;
      if (!task_parts_.empty()) value_codec_.finish_accumulator(body_acc.data(), out);  // un-rotate once per head
      for (const auto& parts : exact_parts_) add_scaled(parts, h, top, sum, out);
      for (size_t j = 0; j < dim_; ++j) out[j] /= sum;
      result.lse[h] = top + std::log(sum);
    }
    return result;
  }

 private:
  const HeadCache& head_;
  const VectorCodec& key_codec_;
  const VectorCodec& value_codec_;
  const float* queries_;
  size_t heads_, dim_;
  float scale_;
  Arithmetic arithmetic_;
  std::vector<ExactPiece> exact_;
  size_t body_, per_task_;
  std::vector<Partials> exact_parts_, task_parts_;
  std::unique_ptr<const PreparedQueries> prepared_;
};

// Runs every item of `steps`, dealt one at a time in order to up to `requested_threads` threads
// (0: all).
void run_items(std::vector<GroupStep>& steps, int requested_threads) {
  std::vector<std::pair<size_t, size_t>> items;  // (step, item)
  for (size_t s = 0; s < steps.size(); ++s)
    for (size_t i = 0; i < steps[s].items(); ++i) items.emplace_back(s, i);
  const long count = static_cast<long>(items.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(team_size(requested_threads, items.size())) if (count > 1)
  for (long k = 0; k < count; ++k) steps[items[k].first].run(items[k].second);
}

}  // namespace

AttentionResult decode_attention(const KVCache& cache, size_t layer, size_t kv_head, const float* queries,
                                 size_t heads, const AttentionOptions& options) {
  check_queries(cache, layer, queries, heads, options);
  std::vector<GroupStep> steps;
  steps.emplace_back(cache, layer, kv_head, queries, heads, options);
  run_items(steps, options.threads);
  return steps.front().merge();
}

// Every group's items in one parallel loop: with fewer KV heads than threads (MQA, or 8 KV heads
// on 16 cores) the body ranges of a head share the threads too.
AttentionResult decode_attention_layer(const KVCache& cache, size_t layer, const float* queries, size_t q_heads,
                                       const AttentionOptions& options) {
  check_queries(cache, layer, queries, q_heads, options);
  const size_t kv_heads = cache.kv_heads(), dim = cache.head_dim();
  require(q_heads % kv_heads == 0, "attention: {} query heads is not a multiple of the {} kv heads", q_heads,
          kv_heads);
  const size_t group = q_heads / kv_heads;
  std::vector<GroupStep> steps;
  steps.reserve(kv_heads);
  for (size_t g = 0; g < kv_heads; ++g) steps.emplace_back(cache, layer, g, queries + g * group * dim, group, options);
  run_items(steps, options.threads);
  std::vector<AttentionResult> groups;
  for (const GroupStep& step : steps) groups.push_back(step.merge());
  return concat_attention(groups);
}

std::vector<float> decode_logits(const KVCache& cache, size_t layer, size_t kv_head, const float* queries,
                                 size_t heads) {
  check_queries(cache, layer, queries, heads, {});
  const HeadCache& head = cache.head(layer, kv_head);
  const size_t dim = cache.head_dim(), n = head.tokens(), body = head.body_count();
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  std::vector<float> logits(heads * n);
  simd::half_row_scores(queries, heads, head.sink_keys.data(), head.sink_count, dim, scale, logits.data(), n);
  simd::half_row_scores(queries, heads, head.window_keys.data(), head.window_count, dim, scale,
                        logits.data() + head.sink_count + body, n);
  const VectorCodec& key_codec = cache.key_codec(layer, kv_head);
  if (body == 0) return logits;
  const PreparedQueries prepared(key_codec, queries, heads, scale);
  key_codec.scores_multi(prepared.pointers.data(), heads, head.body_keys, 0, body, logits.data() + head.sink_count, n);
  return logits;
}

AttentionResult reference_attention(const float* queries, size_t heads, const float* keys, const float* values,
                                    size_t n, size_t dim) {
  AttentionResult result{heads, dim, std::vector<float>(heads * dim, 0.0f),
                         std::vector<float>(heads, kMinusInfinity)};
  const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
  std::vector<double> logits(n);
  for (size_t h = 0; h < heads && n > 0; ++h) {
    double top = -std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < n; ++i) {
      double dot = 0.0;
      for (size_t j = 0; j < dim; ++j) dot += static_cast<double>(queries[h * dim + j]) * keys[i * dim + j];
      logits[i] = dot * scale;
      top = std::max(top, logits[i]);
    }
    double sum = 0.0;
    std::vector<double> out(dim, 0.0);
    for (size_t i = 0; i < n; ++i) {
      const double w = std::exp(logits[i] - top);
      sum += w;
      for (size_t j = 0; j < dim; ++j) out[j] += w * values[i * dim + j];
    }
    for (size_t j = 0; j < dim; ++j) result.output[h * dim + j] = static_cast<float>(out[j] / sum);
    result.lse[h] = static_cast<float>(top + std::log(sum));
  }
  return result;
}

}  // namespace kvsketch
