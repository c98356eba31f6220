#include <cmath>
#include <limits>

#include "kvsketch/error.hpp"
#include "kvsketch/sparse_attention.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {

AttentionResult weighted_attention(const float* query, const BodyView& body, const TokenSelection& selection) {
  require(selection.tokens.size() == selection.log_weights.size(),
          "weighted attention: {} tokens but {} log weights", selection.tokens.size(), selection.log_weights.size());
  const size_t d = body.dim;
  AttentionResult out;
  out.heads = 1;
  out.dim = d;
  out.output.assign(d, 0.0f);
  out.lse.assign(1, -std::numeric_limits<float>::infinity());
  if (selection.tokens.empty()) return out;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> logits(selection.tokens.size());
  float top = -std::numeric_limits<float>::infinity();
  constexpr size_t kAhead = 4;  // selected rows are scattered: fetch a few ahead
  for (size_t s = 0; s < logits.size(); ++s) {
    if (s + kAhead < logits.size() && selection.tokens[s + kAhead] < body.tokens)
      simd::prefetch_row(body.keys + static_cast<size_t>(selection.tokens[s + kAhead]) * d, d);
    const uint32_t token = selection.tokens[s];
    require(token < body.tokens, "weighted attention: token {} is outside the body of {}", token, body.tokens);
    logits[s] = simd::dot(query, body.keys + static_cast<size_t>(token) * d, d) * scale + selection.log_weights[s];
    top = std::max(top, logits[s]);
  }
  double total = 0.0;
  for (size_t s = 0; s < logits.size(); ++s) {
    if (s + kAhead < logits.size())
      simd::prefetch_row(body.values + static_cast<size_t>(selection.tokens[s + kAhead]) * d, d);
    const float weight = std::exp(logits[s] - top);
    total += weight;
    simd::axpy(weight, body.values + static_cast<size_t>(selection.tokens[s]) * d, out.output.data(), d);
  }
  const float inverse = static_cast<float>(1.0 / total);
  for (float& value : out.output) value *= inverse;
  out.lse[0] = top + static_cast<float>(std::log(total));
  return out;
}

}  // namespace kvsketch
