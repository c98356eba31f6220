// The key and value codecs of every layer and KV head of a cache shape, as a policy and a seed
// define them: one place for the shape's limits, the rows' packing and the codecs' seeds, shared by
// KVCache, PagedKVCache and Calibration, so that the same (shape, policy, seed) gives the same
// codecs and therefore the same bits everywhere.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "codec/codec_base.hpp"
#include "kvsketch/kv_policy.hpp"

namespace kvsketch {

// Limits of a cache shape (kv_cache.hpp documents them).
struct CacheShape {
  size_t layers, kv_heads, head_dim;
  size_t heads() const { return layers * kv_heads; }
  size_t index(size_t layer, size_t kv_head) const { return layer * kv_heads + kv_head; }
};

// Throws Error naming the argument unless the shape and the policy fit the limits (the policy is
// validated, its overrides name existing layers, haar rotations and the codecs' state stay bounded
// by max_codec_state_bytes). `who` starts the messages.
void check_cache_shape(const CacheShape& shape, const KVPolicy& policy, size_t max_codec_state_bytes,
                       const char* who);

struct HeadCodecs {
  std::vector<std::unique_ptr<CodecBase>> keys, values;  // at shape.index(layer, kv_head)
};

// Every layer and head's body codecs: each its own rotation and sketch, derived from `seed`, packed
// as current_row_packing() says (row_packing.hpp). The shape must have passed check_cache_shape.
HeadCodecs make_head_codecs(const CacheShape& shape, const KVPolicy& policy, uint64_t seed, const char* who);

// The seed of one head's key (role 0) or value (role 1) codec.
uint64_t head_codec_seed(uint64_t seed, size_t layer, size_t kv_head, int role);

}  // namespace kvsketch
