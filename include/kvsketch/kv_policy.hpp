// KVPolicy: how a KVCache stores keys and values, per layer and separately for K and V.
//
// Spec string (fields separated by '|'):
//   KEYCODEC[|VALUECODEC][|sinks=N][|window=N][|block=N][|page=N][|rollback=N][|layerL=KEYCODEC/VALUECODEC ...]
//   "tq_prod:b=3|tq_mse:b=3"              keys and values by codec spec (see make_codec)
//   "int8"                                 one codec for both
//   "tq_prod:b=3|tq_mse:b=3|layer0=fp16"   layer 0 kept in fp16 (K and V; "fp16/int8" splits them)
// Defaults, as in the QJL and KIVI papers: 4 fp16 sink tokens and a recent window of 128 fp16
// tokens. Tokens that leave the window are encoded into the compressed body `block` at a time,
// so the window holds between `window` and `window + block - 1` tokens.
// page: tokens per page of a PagedKVCache's block store (a multiple of block; paged_cache.hpp): pages
//   fill with encoded tokens, are sealed when full and then shared by forked sequences. 0 (default):
//   the multiple of block nearest 1024.
// rollback: tokens that PagedKVCache::truncate can always drop (speculative decoding); the fp16 of
//   the last rollback tokens (rounded up to whole blocks) that left the window is kept for it.
// How the body's rows lie in memory (plain, or four rows interleaved where this CPU's fused kernel
// reads them so) is the cache's own choice, not part of the policy: the same codes, bytes and
// results either way, and saved files hold plain rows. A layout= field, which older specs and
// files carry, is read and ignored. (KVSKETCH_PACKING=plain or quads in the environment sets the
// packing, to measure one against the other.)
#pragma once
#include <cstddef>
#include <map>
#include <string>

// The library is built with hidden visibility: what this header declares is its exported API.
#pragma GCC visibility push(default)
namespace kvsketch {

struct KVCodecPair {
  std::string key = "tq_prod:b=3";
  std::string value = "tq_mse:b=3";
};

struct KVPolicy {
  KVCodecPair codecs;
  size_t sinks = 4;
  size_t window = 128;
  size_t block = 32;
  size_t page = 0;
  size_t rollback = 0;
  std::map<size_t, KVCodecPair> layer_overrides;

  // Parses the spec string above; errors name the field and what is valid. A field given twice is
  // refused.
  static KVPolicy parse(const std::string& spec);
  // Throws Error unless every field is in range and every codec spec builds (parse() and KVCache
  // call it, so a policy built field by field is checked as a parsed one is).
  void validate() const;
  // Canonical spec string (parse(spec()) gives the same policy).
  std::string spec() const;
  const KVCodecPair& codecs_for(size_t layer) const;
  // Tokens per page: `page`, or its default where 0.
  size_t page_tokens() const;
  // fp16 tokens kept for truncate: rollback rounded up to whole blocks.
  size_t rollback_tokens() const { return (rollback + block - 1) / block * block; }
};

}  // namespace kvsketch
#pragma GCC visibility pop
