#include "cache/paged_pages.hpp"

namespace kvsketch {

size_t Page::bytes() const {
  size_t total = 0;
  for (size_t h = 0; h < keys.size(); ++h) total += keys[h].bytes() + values[h].bytes();
  return total;
}

size_t Page::allocated_bytes() const {
  size_t total = 0;
  for (size_t h = 0; h < keys.size(); ++h) total += keys[h].allocated_bytes() + values[h].allocated_bytes();
  return total;
}

TokenSplit split_tokens(size_t tokens, size_t sinks, size_t window, size_t block) {
  if (tokens <= sinks) return {tokens, 0, 0};
  const size_t rest = tokens - sinks;
  // A window reaching window + block tokens moves its oldest whole blocks to the body, leaving
  // window .. window + block - 1 tokens: the body is the blocks before the last `window` tokens.
  const size_t body = rest >= window + block ? (rest - window) / block * block : 0;
  return {sinks, body, rest - body};
}

}  // namespace kvsketch
