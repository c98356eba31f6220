#include <algorithm>
#include <cmath>

#include "kvsketch/attention.hpp"
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
    const float a = lse_a[h], b = lse_b[h];
    const float* from_a = output_a + h * dim;
    const float* from_b = output_b + h * dim;
    float* to = output + h * dim;
    if (std::isinf(b) && b < 0) {  // b holds no tokens
      if (to != from_a) std::copy(from_a, from_a + dim, to);
      lse[h] = a;
      continue;
    }
    if (std::isinf(a) && a < 0) {
      if (to != from_b) std::copy(from_b, from_b + dim, to);
      lse[h] = b;
      continue;
    }
    const float top = std::max(a, b);
    const float wa = std::exp(a - top), wb = std::exp(b - top);
    const float total = wa + wb;
    for (size_t j = 0; j < dim; ++j) to[j] = (wa * from_a[j] + wb * from_b[j]) / total;
    lse[h] = top + std::log(total);
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
