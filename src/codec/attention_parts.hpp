// A codec's rows as the fused decode-attention kernel reads them (VectorCodec::key_parts and
// value_parts, simd::int_index_attention): parts of b-bit indices, each with its factor per row
// and, as keys, its query heads.
#pragma once
#include <deque>
#include <vector>

#include "simd/int_index_kernels.hpp"

namespace kvsketch {

struct AttentionParts {
  std::vector<simd::AttentionPart> parts;
  std::deque<std::vector<float>> queries;  // the key parts' query heads (a deque: addresses stay put)
};

}  // namespace kvsketch
