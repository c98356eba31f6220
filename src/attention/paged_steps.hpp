// The GroupSteps of a PagedKVCache's decode and chunked prefill (paged_cache.hpp).
#pragma once
#include <cstddef>
#include <vector>

#include "attention/group_step.hpp"
#include "cache/paged_pages.hpp"
#include "kvsketch/attention.hpp"
#include "kvsketch/paged_cache.hpp"

namespace kvsketch {

// KV head g of a sequence's layer over a range of its tokens (sinks, then body rows, then window
// rows, in token order), read by `heads` query heads: fills `step` (begin to finish), with
// `segments` as scratch; both keep their memory for the next step.
void paged_group_step(GroupStep& step, std::vector<CodeSegment>& segments, const CodecBase& key_codec,
                      const CodecBase& value_codec, const SequenceLayer& rows, size_t g, TokenRange range,
                      const float* queries, size_t heads, const AttentionOptions& options);

// The same items, the step left open (before finish()) so that the caller adds pieces of its own.
void paged_group_items(GroupStep& step, std::vector<CodeSegment>& segments, const CodecBase& key_codec,
                       const CodecBase& value_codec, const SequenceLayer& rows, size_t g, TokenRange range,
                       const float* queries, size_t heads, const AttentionOptions& options);

// The token ranges of paged_group_step's items over the whole sequence, in item order.
std::vector<TokenRange> paged_plan(const CodecBase& key_codec, const CodecBase& value_codec,
                                   const SequenceLayer& rows, const AttentionOptions& options);

}  // namespace kvsketch
