#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>

#include "codec/codec_base.hpp"
#include "core/team_size.hpp"
#include "kvsketch/attention.hpp"
#include "core/require.hpp"
#include "attention/group_step.hpp"
#include "simd/attention_kernels.hpp"

namespace kvsketch {
namespace {

constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

void check_queries(const KVCache& cache, size_t layer, const float* queries, size_t heads,
                   const AttentionOptions& options) {
  check_threads(options.threads, "attention");
  require(layer < cache.layers(), "attention: layer {} out of range; the cache has {} layers", layer, cache.layers());
  check_query_heads(queries, heads, cache.head_dim(), "attention");
}

// One KV head's decode step: the sinks and window exactly, the body in ranges (body_tasks).
GroupStep group_step(const KVCache& cache, size_t layer, size_t kv_head, const float* queries, size_t heads,
                     const AttentionOptions& options) {
  const HeadCache& head = cache.head(layer, kv_head);
  const CodecBase& key_codec = codec_base(cache.key_codec(layer, kv_head));
  const CodecBase& value_codec = codec_base(cache.value_codec(layer, kv_head));
  std::vector<CodeSegment> body;
  if (head.body_count() > 0) body.push_back({&head.body_keys, &head.body_values, 0, head.body_count()});
  return GroupStep(key_codec, value_codec, queries, heads,
                   sink_and_window_pieces(head.sink_keys.data(), head.sink_values.data(), head.sink_count,
                                          head.window_keys.data(), head.window_values.data(), head.window_count,
                                          cache.head_dim()),
                   body_tasks(body, options.tokens_per_task,
                              std::lcm(key_codec.row_group(), value_codec.row_group())),
                   options.arithmetic);
}

}  // namespace

AttentionResult decode_attention(const KVCache& cache, size_t layer, size_t kv_head, const float* queries,
                                 size_t heads, const AttentionOptions& options) {
  check_queries(cache, layer, queries, heads, options);
  std::vector<GroupStep> steps;
  steps.push_back(group_step(cache, layer, kv_head, queries, heads, options));
  run_steps(steps, options);
  AttentionResult result{heads, cache.head_dim(), std::vector<float>(heads * cache.head_dim()),
                         std::vector<float>(heads)};
  steps.front().merge(result.output.data(), result.lse.data());
  return result;
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
  for (size_t g = 0; g < kv_heads; ++g) steps.push_back(group_step(cache, layer, g, queries + g * group * dim, group, options));
  run_steps(steps, options);
  AttentionResult result{q_heads, dim, std::vector<float>(q_heads * dim), std::vector<float>(q_heads)};
  for (size_t g = 0; g < kv_heads; ++g)
    steps[g].merge(result.output.data() + g * group * dim, result.lse.data() + g * group);
  return result;
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
  const CodecBase& key_codec = codec_base(cache.key_codec(layer, kv_head));
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
