#include "cache/cache_codecs.hpp"

#include <map>
#include <string>

#include "cache/row_packing.hpp"
#include "core/require.hpp"
#include "kvsketch/kv_cache.hpp"
#include "kvsketch/random.hpp"

namespace kvsketch {
namespace {

// The state (VectorCodec::state_bytes) of the codecs a cache with these layer specs holds: seeds
// change a codec's values, not its size, so one key and one value codec per distinct spec tell.
size_t codec_state_bytes(const std::vector<KVCodecPair>& specs, size_t kv_heads, size_t head_dim) {
  std::map<std::pair<std::string, std::string>, size_t> per_head;
  size_t total = 0;
  for (const KVCodecPair& pair : specs) {
    auto [it, fresh] = per_head.try_emplace({pair.key, pair.value}, 0);
    if (fresh) it->second = make_codec(pair.key, head_dim)->state_bytes() + make_codec(pair.value, head_dim)->state_bytes();
    total += it->second * kv_heads;
  }
  return total;
}

}  // namespace

void check_cache_shape(const CacheShape& shape, const KVPolicy& policy, size_t max_codec_state_bytes,
                       const char* who) {
  const auto [layers, kv_heads, head_dim] = shape;
  require(layers >= 1 && layers <= KVCache::kMaxLayers, "{}: layers must be in 1..{}, got {}", who,
          KVCache::kMaxLayers, layers);
  require(kv_heads >= 1 && kv_heads <= KVCache::kMaxKVHeads, "{}: kv_heads must be in 1..{}, got {}", who,
          KVCache::kMaxKVHeads, kv_heads);
  require(head_dim >= 2 && head_dim <= kMaxDim, "{}: head_dim must be in 2..{}, got {}", who, kMaxDim, head_dim);
  // Every head builds its own key and value codecs up front (rotation signs, sketches, tables):
  // the total is bounded so that construction takes seconds, not hours.
  require(layers * kv_heads <= KVCache::kMaxHeads && layers * kv_heads * head_dim <= KVCache::kMaxHeadValues,
          "{}: {} layers x {} kv heads x head_dim {} is beyond the limits ({} heads, {} heads x head_dim)", who, layers,
          kv_heads, head_dim, KVCache::kMaxHeads, KVCache::kMaxHeadValues);
  policy.validate();
  const auto dense_rotation = [](const KVCodecPair& pair) {
    return pair.key.find("rotation=haar") != std::string::npos || pair.value.find("rotation=haar") != std::string::npos;
  };
  bool haar = dense_rotation(policy.codecs);
  for (const auto& [layer, pair] : policy.layer_overrides) haar = haar || dense_rotation(pair);
  require(!haar || layers * kv_heads * head_dim * head_dim * head_dim <= (size_t{1} << 32),
          "{}: {} layers x {} kv heads of rotation=haar at head_dim {} would build a dense rotation per head "
          "(O(head_dim^3) each, beyond the limit of 2^32); use rotation=hadamard",
          who, layers, kv_heads, head_dim);
  for (const auto& [layer, pair] : policy.layer_overrides)
    require(layer < layers, "{}: policy overrides layer {}, but the cache has {} layers", who, layer, layers);
  std::vector<KVCodecPair> specs;
  for (size_t layer = 0; layer < layers; ++layer) specs.push_back(policy.codecs_for(layer));
  const size_t state = codec_state_bytes(specs, kv_heads, head_dim);
  require(state <= max_codec_state_bytes,
          "{}: {} layers x {} kv heads of this policy's codecs would hold {} MB of rotations and sketches, "
          "beyond {} MB (a dense sketch per head: use sketch=hadamard)",
          who, layers, kv_heads, state >> 20, max_codec_state_bytes >> 20);
}

uint64_t head_codec_seed(uint64_t seed, size_t layer, size_t kv_head, int role) {
  return derive_seed(seed, {layer, kv_head, static_cast<uint64_t>(role)});
}

HeadCodecs make_head_codecs(const CacheShape& shape, const KVPolicy& policy, uint64_t seed, const char* who) {
  const RowPacking packing = current_row_packing();
  // Each distinct pair's packing worked out once (it builds the codecs to ask them, which for a
  // dense sketch or rotation is not free).
  std::map<std::pair<std::string, std::string>, PackedPair> known;
  HeadCodecs codecs;
  for (size_t layer = 0; layer < shape.layers; ++layer) {
    const KVCodecPair& pair = policy.codecs_for(layer);
    auto [it, fresh] = known.try_emplace({pair.key, pair.value});
    if (fresh) it->second = packed_in_quads(pair, packing, policy.block, shape.head_dim);
    const PackedPair quads = it->second;
    for (size_t h = 0; h < shape.kv_heads; ++h) {
      const auto head_codec = [&](const std::string& spec, bool in_quads, int role) {
        return packed_codec(make_codec(spec, shape.head_dim, head_codec_seed(seed, layer, h, role)), in_quads);
      };
      codecs.keys.push_back(head_codec(pair.key, quads.key, 0));
      codecs.values.push_back(head_codec(pair.value, quads.value, 1));
      for (const CodecBase* codec : {codecs.keys.back().get(), codecs.values.back().get()})
        require(policy.block % codec->row_group() == 0,
                "{}: codec {} encodes groups of {} tokens; the policy's block ({}) must be a multiple of it", who,
                codec->spec(), codec->row_group(), policy.block);
    }
  }
  return codecs;
}

}  // namespace kvsketch
