// The fields that cache-shaped files (KVCache, Calibration, PagedKVCache and sequence files) hold
// after their version: the cache's shape, its seed and its policy's spec, in one layout for all.
#pragma once
#include <cstdint>
#include <string>

#include "io/checked_file.hpp"
#include "kvsketch/kv_policy.hpp"

namespace kvsketch {

struct CacheHeader {
  uint64_t layers = 0, kv_heads = 0, head_dim = 0, seed = 0;
  std::string policy;  // KVPolicy::spec()
};

// u64 layers, kv_heads, head_dim, seed; u64 length and the policy spec.
void write_cache_header(BinaryWriter& out, const CacheHeader& header);
CacheHeader read_cache_header(BinaryReader& in);

// The header's policy, parsed; an Error "load: PATH is inconsistent: ..." where it does not parse.
KVPolicy header_policy(const CacheHeader& header, const std::string& path);

}  // namespace kvsketch
