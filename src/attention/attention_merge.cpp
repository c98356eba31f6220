#include <algorithm>
#include <cmath>

#include "kvsketch/attention.hpp"
#include "attention/softmax_merge.hpp"
#include "core/require.hpp"

namespace kvsketch {
namespace {

// The struct's public vectors may disagree with its heads and dim: check before indexing them.
void check_sizes(const AttentionResult& r, const char* operation, const char* which) {
  require(r.output.size() == r.heads * r.dim && r.lse.size() == r.heads,
          "{}: {} claims {} heads x {} dims but holds {} outputs and {} lse values (expected {} and {})", operation,
          which, r.heads, r.dim, r.output.size(), r.lse.size(), r.heads * r.dim, r.heads);
}

}  // namespace

void merge_attention(AttentionResult& into, const AttentionResult& other) {
  require(into.heads == other.heads && into.dim == other.dim,
          "merge_attention: shapes differ ({} x {} and {} x {})", into.heads, into.dim, other.heads, other.dim);
  check_sizes(into, "merge_attention", "into");
  check_sizes(other, "merge_attention", "other");
  merge_attention_states(into.output.data(), into.lse.data(), other.output.data(), other.lse.data(), into.heads,
                         into.dim, into.output.data(), into.lse.data());
}

void merge_attention_states(const float* output_a, const float* lse_a, const float* output_b, const float* lse_b,
                            size_t heads, size_t dim, float* output, float* lse) {
  require(output_a && lse_a && output_b && lse_b && output && lse, "merge_attention_states: null buffer");
  for (size_t h = 0; h < heads; ++h) {
    // The pairs are the pieces (lse, 1, output) of softmax_merge.hpp. The output may be either
    // input's memory: the piece held there is scaled in place first, then the other added.
    float* to = output + h * dim;
    const bool b_first = to == output_b + h * dim;
    const float* first = (b_first ? output_b : output_a) + h * dim;
    const float* second = (b_first ? output_a : output_b) + h * dim;
    const float first_lse = b_first ? lse_b[h] : lse_a[h], second_lse = b_first ? lse_a[h] : lse_b[h];
    const float top = std::max(first_lse, second_lse);
    if (empty_piece(top)) {  // neither holds tokens
      std::fill(to, to + dim, 0.0f);
      lse[h] = top;
      continue;
    }
    float total = 0.0f;
    if (empty_piece(first_lse)) {
      std::fill(to, to + dim, 0.0f);
    } else {
      const float factor = std::exp(first_lse - top);
      total = factor;
      for (size_t j = 0; j < dim; ++j) to[j] = factor * first[j];
    }
    if (!empty_piece(second_lse)) add_rescaled_piece(second_lse, 1.0f, second, dim, top, total, to);
    for (size_t j = 0; j < dim; ++j) to[j] /= total;
    lse[h] = merged_lse(top, total);
  }
}

AttentionResult concat_attention(const std::vector<AttentionResult>& parts) {
  AttentionResult result;
  for (const AttentionResult& part : parts) {
    check_sizes(part, "concat_attention", "a part");
    require(result.heads == 0 || part.dim == result.dim, "concat_attention: head dims differ ({} and {})", result.dim,
            part.dim);
    result.heads += part.heads;
    result.dim = part.dim;
    result.output.insert(result.output.end(), part.output.begin(), part.output.end());
    result.lse.insert(result.lse.end(), part.lse.begin(), part.lse.end());
  }
  return result;
}

}  // namespace kvsketch
