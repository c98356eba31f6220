// The one merge of attention: softmax pieces over disjoint sets of tokens combine exactly.
//
// A piece of one query head is (m, s, a): its largest logit m, s = sum of exp(logit - m) and
// a = sum of exp(logit - m) v over its tokens (in any linear domain of the values). Rescaled to a
// shared top >= every m, pieces add: s = sum_k s_k exp(m_k - top), a likewise; the whole is
// output = a / s with log-sum-exp lse = top + log s. An (output, lse) pair, as vLLM's
// merge_attn_states and FlashInfer's merge_state take it, is the piece (lse, 1, output). GroupStep
// merges its items' pieces and merge_attention_states two pairs through these functions.
#pragma once
#include <cmath>
#include <cstddef>
#include <limits>

namespace kvsketch {

// A piece without tokens has m = -inf (and s = 0).
inline bool empty_piece(float max) { return max == -std::numeric_limits<float>::infinity(); }

// Adds the piece (max, sum, acc[0, width)) rescaled to `top` into (total, into). An empty piece
// adds nothing. `into` may be `acc`'s own memory only where the piece is added first to zeros.
inline void add_rescaled_piece(float max, float sum, const float* acc, size_t width, float top, float& total,
                               float* into) {
  if (sum == 0.0f) return;
  const float factor = std::exp(max - top);
  total += sum * factor;
  for (size_t j = 0; j < width; ++j) into[j] += factor * acc[j];
}

// The log-sum-exp of merged pieces rescaled to `top` with total sum `total`.
inline float merged_lse(float top, float total) { return top + std::log(total); }

}  // namespace kvsketch
