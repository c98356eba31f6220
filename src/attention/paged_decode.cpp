// PagedKVCache::decode and prefill. Every (query position, KV head) is a GroupStep whose items are
// its exact fp16 pieces and its runs of pages; all items of a call run in one parallel batch on the
// executor, then each step merges its items in a fixed order.
#include <vector>

#include "attention/paged_steps.hpp"
#include "cache/half_rows.hpp"
#include "cache/paged_cache_state.hpp"
#include "core/team_size.hpp"
#include "core/require.hpp"
#include "kvsketch/paged_cache.hpp"

namespace kvsketch {
namespace {

// What decode and prefill check of their shared arguments; returns the query heads per KV head.
size_t check_step(size_t kv_heads, size_t head_dim, const float* queries, size_t positions, size_t q_heads,
                  const float* output, const AttentionOptions& options, const char* operation) {
  check_threads(options.threads, operation);
  require(output != nullptr, "{}: null output buffer", operation);
  require(q_heads >= 1 && q_heads % kv_heads == 0, "{}: {} query heads is not a positive multiple of the {} kv heads",
          operation, q_heads, kv_heads);
  check_query_heads(queries, positions * q_heads, head_dim, operation);
  return q_heads / kv_heads;
}

// Merges steps[position * kv_heads + g] into output and lse ([positions][q_heads][...]; lse may be
// null: the workspace's scratch then takes it).
void merge_steps(StepWorkspace& work, size_t positions, size_t kv_heads, size_t group, size_t dim, float* output,
                 float* lse) {
  const size_t q_heads = kv_heads * group;
  if (!lse && work.scratch_lse.size() < group) work.scratch_lse.resize(group);
  for (size_t b = 0; b < positions; ++b)
    for (size_t g = 0; g < kv_heads; ++g) {
      const size_t first = b * q_heads + g * group;
      work.steps[b * kv_heads + g].merge(output + first * dim, lse ? lse + first : work.scratch_lse.data());
    }
}

}  // namespace

void PagedKVCache::decode(size_t layer, const SequenceId* sequences, size_t batch, const float* queries,
                          size_t q_heads, float* output, float* lse, const AttentionOptions& options) const {
  const State& s = *state_;
  s.check_layer(layer, "decode");
  if (batch == 0) return;
  require(sequences != nullptr, "decode: null sequence ids for a batch of {}", batch);
  const size_t kv = s.shape.kv_heads, d = s.shape.head_dim;
  const size_t group = check_step(kv, d, queries, batch, q_heads, output, options, "decode");
  const auto work = s.workspaces.take();
  GroupStep* steps = work->reserve_steps(batch * kv);
  for (size_t b = 0; b < batch; ++b) {
    const SequenceLayer& rows = s.sequence(sequences[b], "decode").layers[layer];
    for (size_t g = 0; g < kv; ++g)
      paged_group_step(steps[b * kv + g], work->segments, *s.codecs.keys[s.shape.index(layer, g)],
                       *s.codecs.values[s.shape.index(layer, g)], rows, g, TokenRange{0, rows.tokens()},
                       queries + (b * q_heads + g * group) * d, group, options);
  }
  run_steps(steps, batch * kv, work->items, options);
  merge_steps(*work, batch, kv, group, d, output, lse);
}

void PagedKVCache::prefill(size_t layer, SequenceId sequence, size_t chunk, const float* queries, size_t q_heads,
                           float* output, float* lse, const AttentionOptions& options) const {
  const State& s = *state_;
  s.check_layer(layer, "prefill");
  const SequenceLayer& rows = s.sequence(sequence, "prefill").layers[layer];
  if (chunk == 0) return;
  require(chunk <= rows.tokens(), "prefill: a chunk of {} tokens, but sequence {} holds {} in layer {}", chunk,
          sequence, rows.tokens(), layer);
  const size_t kv = s.shape.kv_heads, d = s.shape.head_dim;
  const size_t group = check_step(kv, d, queries, chunk, q_heads, output, options, "prefill");
  const size_t first_position = rows.tokens() - chunk;
  // Its own memory, not the pool's: a long chunk's steps would otherwise stay allocated.
  const std::unique_ptr<StepWorkspace> work = std::make_unique<StepWorkspace>();
  GroupStep* steps = work->reserve_steps(chunk * kv);
  for (size_t i = 0; i < chunk; ++i)
    for (size_t g = 0; g < kv; ++g)
      paged_group_step(steps[i * kv + g], work->segments, *s.codecs.keys[s.shape.index(layer, g)],
                       *s.codecs.values[s.shape.index(layer, g)], rows, g, TokenRange{0, first_position + i + 1},
                       queries + (i * q_heads + g * group) * d, group, options);
  run_steps(steps, chunk * kv, work->items, options);
  merge_steps(*work, chunk, kv, group, d, output, lse);
}

void PagedKVCache::attend_chunk(size_t layer, SequenceId sequence, size_t chunk, const float* queries,
                                size_t q_heads, const float* keys, const float* values, float* output, float* lse,
                                const AttentionOptions& options) const {
  const State& s = *state_;
  s.check_layer(layer, "attend_chunk");
  const SequenceLayer& rows = s.sequence(sequence, "attend_chunk").layers[layer];
  if (chunk == 0) return;
  require(keys != nullptr && values != nullptr, "attend_chunk: null keys or values for a chunk of {} tokens", chunk);
  const size_t kv = s.shape.kv_heads, d = s.shape.head_dim, past = rows.tokens();
  const size_t group = check_step(kv, d, queries, chunk, q_heads, output, options, "attend_chunk");
  check_half_range(keys, layer, kv, chunk, past, d, "keys");
  check_half_range(values, layer, kv, chunk, past, d, "values");
  // The chunk as the window would hold it: fp16, each KV head's rows together.
  std::vector<uint16_t> half_keys, half_values;
  append_halves(half_keys, keys, kv * chunk * d);
  append_halves(half_values, values, kv * chunk * d);
  const std::unique_ptr<StepWorkspace> work = std::make_unique<StepWorkspace>();
  GroupStep* steps = work->reserve_steps(chunk * kv);
  for (size_t i = 0; i < chunk; ++i)
    for (size_t g = 0; g < kv; ++g) {
      GroupStep& step = steps[i * kv + g];
      paged_group_items(step, work->segments, *s.codecs.keys[s.shape.index(layer, g)],
                        *s.codecs.values[s.shape.index(layer, g)], rows, g, TokenRange{0, past},
                        queries + (i * q_heads + g * group) * d, group, options);
      step.add_exact({half_keys.data() + g * chunk * d, half_values.data() + g * chunk * d, i + 1});
      step.finish();
    }
  run_steps(steps, chunk * kv, work->items, options);
  merge_steps(*work, chunk, kv, group, d, output, lse);
}

std::vector<TokenRange> PagedKVCache::plan(size_t layer, SequenceId sequence, const AttentionOptions& options) const {
  const State& s = *state_;
  s.check_layer(layer, "plan");
  return paged_plan(*s.codecs.keys[s.shape.index(layer, 0)], *s.codecs.values[s.shape.index(layer, 0)],
                    s.sequence(sequence, "plan").layers[layer], options);
}

void PagedKVCache::decode_range(size_t layer, SequenceId sequence, TokenRange range, const float* queries,
                                size_t q_heads, float* output, float* lse, const AttentionOptions& options) const {
  const State& s = *state_;
  s.check_layer(layer, "decode_range");
  const SequenceLayer& rows = s.sequence(sequence, "decode_range").layers[layer];
  require(range.first <= rows.tokens() && range.count <= rows.tokens() - range.first,
          "decode_range: tokens [{}, {} + {}) are beyond the {} tokens of sequence {} in layer {}", range.first,
          range.first, range.count, rows.tokens(), sequence, layer);
  const size_t kv = s.shape.kv_heads, d = s.shape.head_dim;
  const size_t group = check_step(kv, d, queries, 1, q_heads, output, options, "decode_range");
  const auto work = s.workspaces.take();
  GroupStep* steps = work->reserve_steps(kv);
  for (size_t g = 0; g < kv; ++g)
    paged_group_step(steps[g], work->segments, *s.codecs.keys[s.shape.index(layer, g)],
                     *s.codecs.values[s.shape.index(layer, g)], rows, g, range, queries + g * group * d, group,
                     options);
  run_steps(steps, kv, work->items, options);
  merge_steps(*work, 1, kv, group, d, output, lse);
}

}  // namespace kvsketch
