#include "cache/cache_header.hpp"

#include <fmt/format.h>

#include "kvsketch/error.hpp"

namespace kvsketch {

void write_cache_header(BinaryWriter& out, const CacheHeader& header) {
  out.u64(header.layers);
  out.u64(header.kv_heads);
  out.u64(header.head_dim);
  out.u64(header.seed);
  out.text(header.policy);
}

CacheHeader read_cache_header(BinaryReader& in) {
  CacheHeader header;
  header.layers = in.u64("layers");
  header.kv_heads = in.u64("kv_heads");
  header.head_dim = in.u64("head_dim");
  header.seed = in.u64("seed");
  header.policy = in.text("policy");
  return header;
}

KVPolicy header_policy(const CacheHeader& header, const std::string& path) {
  try {
    return KVPolicy::parse(header.policy);
  } catch (const Error& e) {
    throw Error(fmt::format("load: {} is inconsistent: {}", path, e.what()));
  }
}

}  // namespace kvsketch
