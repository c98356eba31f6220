// PagedKVCache::decode: one decode step of a layer for a batch of sequences. Every (sequence, KV
// head) is a GroupStep whose items are its exact fp16 pieces and its pages; all items of the batch
// run in one parallel batch on the executor, then each step merges its items in a fixed order.
#include <numeric>
#include <vector>

#include "attention/group_step.hpp"
#include "cache/paged_cache_state.hpp"
#include "core/team_size.hpp"
#include "kvsketch/error.hpp"
#include "kvsketch/paged_cache.hpp"

namespace kvsketch {

void PagedKVCache::decode(size_t layer, const SequenceId* sequences, size_t batch, const float* queries,
                          size_t q_heads, float* output, float* lse, const AttentionOptions& options) const {
  const State& s = *state_;
  check_threads(options.threads, "decode");
  s.check_layer(layer, "decode");
  if (batch == 0) return;
  require(sequences != nullptr, "decode: null sequence ids for a batch of {}", batch);
  require(output != nullptr, "decode: null output buffer");
  const size_t kv = s.shape.kv_heads, d = s.shape.head_dim;
  require(q_heads >= 1 && q_heads % kv == 0, "decode: {} query heads is not a positive multiple of the {} kv heads",
          q_heads, kv);
  check_query_heads(queries, batch * q_heads, d, "decode");
  const size_t group = q_heads / kv;
  std::vector<GroupStep> steps;
  steps.reserve(batch * kv);
  for (size_t b = 0; b < batch; ++b) {
    const SequenceLayer& rows = s.sequence(sequences[b], "decode").layers[layer];
    for (size_t g = 0; g < kv; ++g) {
      const HeadRows& head = rows.heads[g];
      const size_t live = head.retained * d;  // the window's tokens not yet encoded start here
      const VectorCodec& key_codec = *s.codecs.keys[s.shape.index(layer, g)];
      const VectorCodec& value_codec = *s.codecs.values[s.shape.index(layer, g)];
      std::vector<CodeSegment> pages;
      for (const auto& page : rows.pages) pages.push_back({&page->keys[g], &page->values[g], 0, page->rows()});
      steps.emplace_back(key_codec, value_codec, queries + (b * q_heads + g * group) * d, group,
                         sink_and_window_pieces(head.sink_keys.data(), head.sink_values.data(), head.sinks,
                                                head.window_keys.data() + live, head.window_values.data() + live,
                                                head.window, d),
                         body_tasks(pages, options.tokens_per_task,
                                    std::lcm(key_codec.row_group(), value_codec.row_group())),
                         options.arithmetic);
    }
  }
  if (options.executor) {
    run_steps(steps, *options.executor);
  } else {
    OpenMPExecutor executor(options.threads);
    run_steps(steps, executor);
  }
  std::vector<float> scratch_lse(lse ? 0 : group);
  for (size_t b = 0; b < batch; ++b)
    for (size_t g = 0; g < kv; ++g) {
      const size_t first = b * q_heads + g * group;
      steps[b * kv + g].merge(output + first * d, lse ? lse + first : scratch_lse.data());
    }
}

}  // namespace kvsketch
