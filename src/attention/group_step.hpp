// One GQA group's decode step, in three phases that any cache layout shares: its items (exact
// fp16 pieces, then ranges of code rows), each run by any thread; and their merge by log-sum-exp in
// a fixed order. The items depend on the cache and the options only, never on the thread count,
// so the merged answer has the same bits on any number of threads and any executor.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "codec/attention_scratch.hpp"
#include "kvsketch/attention.hpp"
#include "codec/codec_base.hpp"
#include "kvsketch/executor.hpp"

namespace kvsketch {

// Rows of keys and values attended exactly: fp16, or floats (code rows decoded, where a range ends
// inside a row group that the codec reads only whole).
struct ExactPiece {
  const uint16_t* keys;
  const uint16_t* values;
  size_t rows;
  const float* float_keys = nullptr;  // where set, the rows are these floats instead
  const float* float_values = nullptr;
};

// Softmax pieces of the query heads over some tokens: per head the max logit, the sum of
// exp(logit - max), and the exp-weighted sum of values (width floats, in whatever domain the
// values are accumulated), so that parts merge exactly. One allocation per field, not per head;
// reset() keeps that memory for the next step.
struct Partials {
  size_t width = 0;
  std::vector<float> max, sum, acc;  // acc: head h at h * width
  Partials() = default;
  Partials(size_t heads, size_t width);
  void reset(size_t heads, size_t width);
  const float* head_acc(size_t h) const { return acc.data() + h * width; }
};

// Each query head times the logit scale, prepared once for the codec (rotated, sketched, tables
// built): every estimator is linear in the query, so its scores come out scaled. prepare() reuses
// the queries of an earlier step where the codec can refill them in place.
struct PreparedQueries {
  std::vector<std::unique_ptr<PreparedQuery>> owned;
  std::vector<const PreparedQuery*> pointers;
  std::vector<float> scaled;
  PreparedQueries() = default;
  PreparedQueries(const CodecBase& codec, const float* queries, size_t heads, float scale);
  void prepare(const CodecBase& codec, const float* queries, size_t heads, float scale);
};

// What an item of a step reuses from call to call: held by the step, not by the thread that runs it.
struct ItemScratch {
  std::vector<float> logits;
  AttentionScratch attention;
};

// One KV head's step for its query heads: exact pieces, then body tasks (each a run of code
// segments), each an item that any thread may run; then the merge. A step is reusable: begin()
// starts a new one in the memory of the last, so that a warm decode call allocates nothing.
class GroupStep {
 public:
  GroupStep() = default;
  // `exact` pieces and `body` tasks (body_tasks) of one KV head, read by `heads` query heads
  // (heads x dim). `storage` holds what float pieces point to (moved in, so the pointers stay valid).
  GroupStep(const CodecBase& key_codec, const CodecBase& value_codec, const float* queries, size_t heads,
            std::vector<ExactPiece> exact, std::vector<std::vector<CodeSegment>> body, Arithmetic arithmetic,
            std::vector<std::vector<float>> storage = {});

  // Starts a step of `heads` query heads (heads x dim at `queries`) through these codecs; then
  // add_exact and add_body give its items, and finish() prepares the queries.
  void begin(const CodecBase& key_codec, const CodecBase& value_codec, const float* queries, size_t heads,
             Arithmetic arithmetic);
  void add_exact(const ExactPiece& piece) { exact_.push_back(piece); }
  // The body's segments, cut into tasks as body_tasks cuts them.
  void add_body(const CodeSegment* segments, size_t count, size_t tokens_per_task, size_t group);
  // Floats that exact pieces point to, kept until the next begin().
  void keep(std::vector<float> floats) { storage_.push_back(std::move(floats)); }
  void finish();

  size_t items() const { return exact_.size() + task_ends_.size(); }
  // Item i's partial sums; distinct items may run at once.
  void run(size_t i);
  // The items' partial sums merged by log-sum-exp, in item order: output (heads x dim) and lse
  // (heads; -inf, with a zero output, where there are no tokens).
  void merge(float* output, float* lse);

 private:
  const CodecBase* key_codec_ = nullptr;
  const CodecBase* value_codec_ = nullptr;
  const float* queries_ = nullptr;
  size_t heads_ = 0, dim_ = 0;
  float scale_ = 1.0f;
  Arithmetic arithmetic_ = Arithmetic::kInteger;
  std::vector<ExactPiece> exact_;
  std::vector<CodeSegment> segments_;  // the body tasks' segments, task after task
  std::vector<size_t> task_ends_;      // task t is segments_[t ? task_ends_[t - 1] : 0, task_ends_[t])
  std::vector<std::vector<float>> storage_;
  std::vector<Partials> parts_;              // items' partial sums: the exact pieces', then the tasks'
  std::vector<ItemScratch> scratch_;         // items' memory, kept from call to call
  std::vector<float> merge_acc_;
  PreparedQueries prepared_;
};

// The body's segments (one range, or a sequence's pages) cut into the tasks that run in parallel: each
// task a run of consecutive segments of about tokens_per_task tokens, a segment longer than that cut
// into ranges that start on whole row groups (`group`: KIVI keys share scales over a group). Each
// kernel call costs a few microseconds besides its rows, so tasks are long, but a body that would
// fit one task is cut in two from 2048 tokens on, so that two threads share a short context too.
// The tasks depend on the segments and tokens_per_task only, never on the thread count, so the
// merged answer is the same bits on any.
std::vector<std::vector<CodeSegment>> body_tasks(const std::vector<CodeSegment>& segments, size_t tokens_per_task,
                                                 size_t group);

// The exact pieces of sinks and a recent window: the sinks, then the window in two halves. The
// halves run beside each other and beside the body ranges, so that two threads share the window's
// reads. The split depends on the window's length only, never on the thread count.
// The same pieces added to a step.
void add_sink_and_window_pieces(GroupStep& step, const uint16_t* sink_keys, const uint16_t* sink_values, size_t sinks,
                                const uint16_t* window_keys, const uint16_t* window_values, size_t window,
                                size_t dim);
std::vector<ExactPiece> sink_and_window_pieces(const uint16_t* sink_keys, const uint16_t* sink_values, size_t sinks,
                                               const uint16_t* window_keys, const uint16_t* window_values,
                                               size_t window, size_t dim);

// Runs every item of the first `count` steps on the executor (items dealt in order: the steps' first
// items first); `items` is the list's memory, kept by the caller between calls.
void run_steps(GroupStep* steps, size_t count, std::vector<std::pair<size_t, size_t>>& items, Executor& executor);
// The same on the options' executor, or on `options.threads` OpenMP threads.
void run_steps(GroupStep* steps, size_t count, std::vector<std::pair<size_t, size_t>>& items,
               const AttentionOptions& options);
void run_steps(std::vector<GroupStep>& steps, const AttentionOptions& options);

// The checks every decode entry point makes of its query heads (heads x dim floats).
void check_query_heads(const float* queries, size_t heads, size_t dim, const char* operation);

}  // namespace kvsketch
