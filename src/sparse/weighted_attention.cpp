#include <cmath>
#include <limits>
#include <utility>

#include "core/require.hpp"
#include "kvsketch/sparse_attention.hpp"
#include "sparse/body_rows.hpp"

namespace kvsketch {

BodyView BodyView::compressed(const VectorCodec& key_codec, const CodeBuffer& keys, const VectorCodec& value_codec,
                              const CodeBuffer& values) {
  BodyView body;
  body.tokens = keys.size();
  body.dim = key_codec.dim();
  body.key_codec = &key_codec;
  body.key_codes = &keys;
  body.value_codec = &value_codec;
  body.value_codes = &values;
  check_body(body, "compressed body");
  return body;
}

BodyView BodyView::paged(const VectorCodec& key_codec, const CodeBuffer* const* key_pages,
                         const VectorCodec& value_codec, const CodeBuffer* const* value_pages, size_t page_rows,
                         size_t first_row, size_t tokens) {
  BodyView body;
  body.tokens = tokens;
  body.dim = key_codec.dim();
  body.key_codec = &key_codec;
  body.key_pages = key_pages;
  body.value_codec = &value_codec;
  body.value_pages = value_pages;
  body.page_rows = page_rows;
  body.first_row = first_row;
  check_body(body, "paged body");
  return body;
}

BodyView BodyView::of(const KVCache& cache, size_t layer, size_t kv_head) {
  const HeadCache& head = cache.head(layer, kv_head);
  return compressed(cache.key_codec(layer, kv_head), head.body_keys, cache.value_codec(layer, kv_head),
                    head.body_values);
}

namespace {

AttentionResult empty_result(size_t dim) {
  AttentionResult out;
  out.heads = 1;
  out.dim = dim;
  out.output.assign(dim, 0.0f);
  out.lse.assign(1, -std::numeric_limits<float>::infinity());
  return out;
}

// The softmax numerator over rows `tokens` (nullptr: rows 0..n-1) of q k / sqrt(d) + log weight
// (log_weights nullptr: 0), with q k given in `scores` or read from the body: adds
// exp(logit - top) v to `values` and returns top and the sum of exp(logit - top).
std::pair<float, double> add_numerator(const float* query, const BodyView& body, const uint32_t* tokens, size_t n,
                                       const float* log_weights, const float* scores, BodyValueSum& values) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(body.dim));
  std::vector<float> logits(n);
  if (scores)
    for (size_t s = 0; s < n; ++s) logits[s] = scores[s] * scale;
  else
    body_key_scores(query, body, tokens, n, scale, logits.data());
  float top = -std::numeric_limits<float>::infinity();
  for (size_t s = 0; s < n; ++s) {
    if (log_weights) logits[s] += log_weights[s];
    top = std::max(top, logits[s]);
  }
  double total = 0.0;
  for (float& logit : logits) {
    logit = std::exp(logit - top);  // now the weight
    total += logit;
  }
  values.add(tokens, logits.data(), n);
  return {top, total};
}

// out = the sum held in `values` over total, lse = top + log total.
void normalize(BodyValueSum& values, float top, double total, AttentionResult& out) {
  values.scale(static_cast<float>(1.0 / total));
  values.finish(out.output.data());
  out.lse[0] = top + static_cast<float>(std::log(total));
}

}  // namespace

AttentionResult dense_attention(const float* query, const BodyView& body) {
  check_body(body, "dense attention");
  AttentionResult out = empty_result(body.dim);
  if (body.tokens == 0) return out;
  BodyValueSum values(body);
  const auto [top, total] = add_numerator(query, body, nullptr, body.tokens, nullptr, nullptr, values);
  normalize(values, top, total, out);
  return out;
}

AttentionResult weighted_attention(const float* query, const BodyView& body, const TokenSelection& selection) {
  check_body(body, "weighted attention");
  require(selection.tokens.size() == selection.log_weights.size(),
          "weighted attention: {} tokens but {} log weights", selection.tokens.size(), selection.log_weights.size());
  require(!selection.separate_denominator ||
              selection.denominator_tokens.size() == selection.denominator_log_weights.size(),
          "weighted attention: {} denominator tokens but {} log weights", selection.denominator_tokens.size(),
          selection.denominator_log_weights.size());
  const bool scored = !selection.scores.empty();
  require(!scored || selection.scores.size() == selection.tokens.size(), "weighted attention: {} tokens but {} scores",
          selection.tokens.size(), selection.scores.size());
  for (const auto* tokens : {&selection.tokens, &selection.denominator_tokens})
    for (const uint32_t token : *tokens)
      require(token < body.tokens, "weighted attention: token {} is outside the body of {}", token, body.tokens);
  AttentionResult out = empty_result(body.dim);
  if (selection.tokens.empty() && selection.denominator_tokens.empty()) return out;
  BodyValueSum values(body);
  auto [top, total] = add_numerator(query, body, selection.tokens.data(), selection.tokens.size(),
                                    selection.log_weights.data(), scored ? selection.scores.data() : nullptr, values);
  if (selection.separate_denominator) {
    // The normalizer from its own subset: the shift `top` must be common, so rescale if it grows.
    std::vector<float> denominator(selection.denominator_tokens.size());
    const float scale = 1.0f / std::sqrt(static_cast<float>(body.dim));
    body_key_scores(query, body, selection.denominator_tokens.data(), denominator.size(), scale, denominator.data());
    float shift = top;
    for (size_t s = 0; s < denominator.size(); ++s) {
      denominator[s] += selection.denominator_log_weights[s];
      shift = std::max(shift, denominator[s]);
    }
    values.scale(std::exp(top - shift));
    top = shift;
    total = 0.0;
    for (const float logit : denominator) total += std::exp(logit - top);
    if (total == 0.0) return out;
  }
  normalize(values, top, total, out);
  return out;
}

}  // namespace kvsketch
