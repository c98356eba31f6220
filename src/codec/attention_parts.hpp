// A codec's rows as the fused decode-attention kernel reads them (VectorCodec::key_parts and
// value_parts, simd::int_index_attention): parts of b-bit indices, each with its factor per row
// and, as keys, its query heads.
#pragma once
#include <deque>
#include <optional>
#include <vector>

#include "simd/int_index_kernels.hpp"

namespace kvsketch {

struct AttentionParts {
  std::vector<simd::AttentionPart> parts;
  std::deque<std::vector<float>> queries;  // the key parts' query heads (a deque: addresses stay put)
  // Keys: a factor of the first part's rows that multiplies the parts' summed score (TurboQuant
  // prod's norm, over its scalar and sign parts), and a shift per head added last (centred keys).
  std::optional<simd::RowFactor> score_factor;
  std::vector<float> score_shift;
  // Values: where the sum of the weights goes (centred values: head h's at weight_sums[k] + h *
  // stride for every k); attend_multi writes the kernel's softmax sums there.
  std::vector<float*> weight_sums;
  size_t weight_sum_stride = 0;

  simd::AttentionKeys keys() const {
    return {parts.data(), parts.size(), score_factor ? &*score_factor : nullptr,
            score_shift.empty() ? nullptr : score_shift.data()};
  }
};

}  // namespace kvsketch
