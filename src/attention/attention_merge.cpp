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
  for (size_t h = 0; h < into.heads; ++h) {
    const float a = into.lse[h], b = other.lse[h];
    if (std::isinf(b) && b < 0) continue;
    const float top = std::max(a, b);
    const float wa = std::exp(a - top), wb = std::exp(b - top);
    const float total = wa + wb;
    for (size_t j = 0; j < into.dim; ++j)
      into.output[h * into.dim + j] = (wa * into.output[h * into.dim + j] + wb * other.output[h * into.dim + j]) / total;
    into.lse[h] = top + std::log(total);
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
