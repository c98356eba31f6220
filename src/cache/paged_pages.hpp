// The storage of a PagedKVCache sequence (paged_cache.hpp): its pages of codes and its fp16 rows,
// per layer. Internal; the cache keeps the invariants written here.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kvsketch/codec.hpp"

namespace kvsketch {

// One layer's page: per KV head, up to `page` rows of key and value codes. A page is sealed when
// full; only sealed pages are ever shared, so a page with room is owned by one sequence.
struct Page {
  std::vector<CodeBuffer> keys, values;  // per kv head
  size_t rows() const { return keys.front().size(); }
  size_t bytes() const;
  size_t allocated_bytes() const;
};

// The fp16 rows of one layer and KV head of a sequence. `window_keys` and `window_values` hold the
// last `retained` encoded tokens (kept for truncate), then the `window` tokens not yet encoded.
struct HeadRows {
  std::vector<uint16_t> sink_keys, sink_values;
  std::vector<uint16_t> window_keys, window_values;
  size_t sinks = 0, retained = 0, window = 0;
  size_t bytes() const { return 2 * (sink_keys.size() + sink_values.size() + window_keys.size() + window_values.size()); }
  size_t allocated_bytes() const {
    return 2 * (sink_keys.capacity() + sink_values.capacity() + window_keys.capacity() + window_values.capacity());
  }
};

struct SequenceLayer {
  std::vector<std::shared_ptr<Page>> pages;  // every page full (sealed) but perhaps the last
  size_t body = 0;                           // encoded tokens: the rows of all pages
  std::vector<HeadRows> heads;
  size_t tokens() const { return heads.front().sinks + body + heads.front().window; }
};

struct Sequence {
  std::vector<SequenceLayer> layers;
};

// Where a layer of `tokens` tokens keeps them under (sinks, window, block): its first `sinks`
// tokens as sinks, then whole blocks in the body until the window holds fewer than window + block.
struct TokenSplit {
  size_t sinks, body, window;
};
TokenSplit split_tokens(size_t tokens, size_t sinks, size_t window, size_t block);

}  // namespace kvsketch
