// The GroupSteps of a PagedKVCache's decode and chunked prefill (paged_cache.hpp).
#pragma once
#include <cstddef>
#include <vector>

#include "attention/group_step.hpp"
#include "cache/paged_pages.hpp"
#include "kvsketch/attention.hpp"

namespace kvsketch {

// KV head g of a sequence's layer, over its first `prefix` tokens (sinks, then body rows, then
// window rows, in token order), read by `heads` query heads.
GroupStep paged_group_step(const VectorCodec& key_codec, const VectorCodec& value_codec, const SequenceLayer& rows,
                           size_t g, size_t prefix, const float* queries, size_t heads,
                           const AttentionOptions& options);

// Runs the steps on the options' executor, or on OpenMP threads.
void run_paged_steps(std::vector<GroupStep>& steps, const AttentionOptions& options);

}  // namespace kvsketch
