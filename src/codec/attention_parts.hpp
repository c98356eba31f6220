// A codec's rows as the fused decode-attention kernel reads them: its RowLayout bound to rows in
// memory and to the query heads (CodecBase::key_parts and value_parts, simd::int_index_attention):
// parts of b-bit indices, each with its factor per row and, as keys, its query heads.
#pragma once
#include <deque>
#include <optional>
#include <vector>

#include "simd/int_index_kernels.hpp"

namespace kvsketch {

struct AttentionParts {
  std::vector<simd::AttentionPart> parts;
  std::deque<std::vector<float>> queries;  // the key parts' query heads (a deque: addresses stay put)
  // Keys: groups of consecutive parts whose scores add up, each with an optional factor of its
  // first part's rows over the sum (TurboQuant prod's norm over its scalar and sign parts); a
  // shift per head added last (centred keys).
  struct Group {
    size_t first, count;
    std::optional<simd::RowFactor> factor;
  };
  std::vector<Group> groups;
  std::vector<float> score_shift;
  // Values: where the sum of the weights goes (centred values: head h's at weight_sums[k] + h *
  // stride for every k); attend_multi writes the kernel's softmax sums there.
  std::vector<float*> weight_sums;
  size_t weight_sum_stride = 0;

  size_t queries_used = 0;  // queries[0, queries_used) are this call's; the rest keep their memory

  // A buffer for n floats of query heads, reusing an earlier call's memory where there is one.
  std::vector<float>& next_query(size_t n) {
    if (queries_used == queries.size()) queries.emplace_back();
    std::vector<float>& buffer = queries[queries_used++];
    buffer.resize(n);
    return buffer;
  }
  // Empty, keeping the memory (a thread's parts serve each call of attend_segments).
  void reset() {
    parts.clear();
    queries_used = 0;
    groups.clear();
    score_shift.clear();
    weight_sums.clear();
    weight_sum_stride = 0;
  }

  // Parts [first, parts.size()) as one key group.
  void close_group(size_t first, std::optional<simd::RowFactor> factor = std::nullopt) {
    groups.push_back({first, parts.size() - first, factor});
  }

  // The kernel's view of the keys; `storage` holds the groups it points to.
  simd::AttentionKeys keys(std::vector<simd::AttentionKeyGroup>& storage) const {
    storage.clear();
    for (const Group& group : groups)
      storage.push_back({parts.data() + group.first, group.count, group.factor ? &*group.factor : nullptr});
    return {storage.data(), storage.size(), score_shift.empty() ? nullptr : score_shift.data()};
  }
};

}  // namespace kvsketch
