#include <cmath>
#include <limits>

#include "kvsketch/error.hpp"
#include "kvsketch/sparse_attention.hpp"
#include "sparse/body_rows.hpp"

namespace kvsketch {

AttentionResult weighted_attention(const float* query, const BodyView& body, const TokenSelection& selection) {
  require(selection.tokens.size() == selection.log_weights.size(),
          "weighted attention: {} tokens but {} log weights", selection.tokens.size(), selection.log_weights.size());
  require(!selection.separate_denominator ||
              selection.denominator_tokens.size() == selection.denominator_log_weights.size(),
          "weighted attention: {} denominator tokens but {} log weights", selection.denominator_tokens.size(),
          selection.denominator_log_weights.size());
  const bool scored = !selection.scores.empty();
  require(!scored || selection.scores.size() == selection.tokens.size(), "weighted attention: {} tokens but {} scores",
          selection.tokens.size(), selection.scores.size());
  const size_t d = body.dim;
  AttentionResult out;
  out.heads = 1;
  out.dim = d;
  out.output.assign(d, 0.0f);
  out.lse.assign(1, -std::numeric_limits<float>::infinity());
  if (selection.tokens.empty() && selection.denominator_tokens.empty()) return out;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> logits(selection.tokens.size());
  float top = -std::numeric_limits<float>::infinity();
  constexpr size_t kAhead = 16;  // selected rows are scattered: fetch a few ahead
  for (size_t s = 0; s < logits.size(); ++s) {
    if (!scored && s + kAhead < logits.size() && selection.tokens[s + kAhead] < body.tokens)
      body_prefetch(body, selection.tokens[s + kAhead], /*key=*/true);
    const uint32_t token = selection.tokens[s];
    require(token < body.tokens, "weighted attention: token {} is outside the body of {}", token, body.tokens);
    const float score = scored ? selection.scores[s] : body_key_dot(query, body, token);
    logits[s] = score * scale + selection.log_weights[s];
    top = std::max(top, logits[s]);
  }
  double total = 0.0;
  for (size_t s = 0; s < logits.size(); ++s) {
    if (s + kAhead < logits.size())
      body_prefetch(body, selection.tokens[s + kAhead], /*key=*/false);
    const float weight = std::exp(logits[s] - top);
    total += weight;
    body_add_value(weight, body, selection.tokens[s], out.output.data());
  }
  if (selection.separate_denominator) {
    // The normalizer from its own subset: the shift `top` must be common, so rescale if it grows.
    std::vector<float> denominator(selection.denominator_tokens.size());
    float shift = top;
    for (size_t s = 0; s < denominator.size(); ++s) {
      const uint32_t token = selection.denominator_tokens[s];
      require(token < body.tokens, "weighted attention: token {} is outside the body of {}", token, body.tokens);
      denominator[s] = body_key_dot(query, body, token) * scale + selection.denominator_log_weights[s];
      shift = std::max(shift, denominator[s]);
    }
    const float rescale = std::exp(top - shift);
    for (float& value : out.output) value *= rescale;
    top = shift;
    total = 0.0;
    for (const float logit : denominator) total += std::exp(logit - top);
    if (total == 0.0) {
      std::fill(out.output.begin(), out.output.end(), 0.0f);
      return out;
    }
  }
  const float inverse = static_cast<float>(1.0 / total);
  for (float& value : out.output) value *= inverse;
  out.lse[0] = top + static_cast<float>(std::log(total));
  return out;
}

}  // namespace kvsketch
