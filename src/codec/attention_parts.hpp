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
  // prod's norm, over its scalar and sign parts).
  std::optional<simd::RowFactor> score_factor;
};

}  // namespace kvsketch
