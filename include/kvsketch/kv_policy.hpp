// KVPolicy: how a KVCache stores keys and values, per layer and separately for K and V.
//
// Spec string (fields separated by '|'):
//   KEYCODEC[|VALUECODEC][|sinks=N][|window=N][|block=N][|layout=L][|layerL=KEYCODEC/VALUECODEC ...]
//   "tq_prod:b=3|tq_mse:b=3"              keys and values by codec spec (see make_codec)
//   "int8"                                 one codec for both
//   "tq_prod:b=3|tq_mse:b=3|layer0=fp16"   layer 0 kept in fp16 (K and V; "fp16/int8" splits them)
// Defaults, as in the QJL and KIVI papers: 4 fp16 sink tokens and a recent window of 128 fp16
// tokens. Tokens that leave the window are encoded into the compressed body `block` at a time,
// so the window holds between `window` and `window + block - 1` tokens.
// layout: how the body's rows lie in memory (the same codes, bytes and results either way):
//   plain  one row after another
//   quads  four rows interleaved (quads:SPEC, codec/quad_rows_codec.hpp), which the fused decode
//          kernel reads four rows per load on AVX3_DL (AVX-512 VBMI) but other CPUs copy back first
//   auto   (default) quads where this CPU's kernel reads both the key and the value rows in place,
//          plain elsewhere
// page: tokens per page of a PagedKVCache's block store (a multiple of block; paged_cache.hpp): pages
//   fill with encoded tokens, are sealed when full and then shared by forked sequences. 0 (default):
//   the multiple of block nearest 1024.
// rollback: tokens that PagedKVCache::truncate can always drop (speculative decoding); the fp16 of
//   the last rollback tokens (rounded up to whole blocks) that left the window is kept for it.
// Saved files hold the body as plain rows whatever the layout, so that they are the same bytes on
// every machine.
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

enum class RowLayout { kAuto, kPlain, kQuads };

struct KVPolicy {
  KVCodecPair codecs;
  size_t sinks = 4;
  size_t window = 128;
  size_t block = 32;
  size_t page = 0;
  size_t rollback = 0;
  RowLayout layout = RowLayout::kAuto;
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
