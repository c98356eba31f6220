#include "sparse/lsh_tables.hpp"

#include <algorithm>

#include "core/require.hpp"

namespace kvsketch {

LshTables::LshTables(int bits, int tables) : bits_(bits), tables_(tables), bucketed_(bits <= kMostBucketedBits) {
  require(bits >= 1 && bits <= 32 && tables >= 1, "lsh tables: bad shape K={} L={}", bits, tables);
  if (bits <= 16)
    narrow_.resize(static_cast<size_t>(tables));
  else
    wide_.resize(static_cast<size_t>(tables));
}

void LshTables::add(const uint32_t* codes) {
  for (size_t t = 0; t < static_cast<size_t>(tables_); ++t) {
    if (!bucketed_) {
      if (bits_ <= 16)
        push_back_in_steps(narrow_[t], static_cast<uint16_t>(codes[t]));
      else
        push_back_in_steps(wide_[t], codes[t]);
      continue;
    }
    if (narrow_[t].capacity() < kOpenTokens) narrow_[t].reserve(kOpenTokens);
    narrow_[t].push_back(static_cast<uint16_t>(codes[t]));
  }
  ++tokens_;
  if (bucketed_ && narrow_[0].size() == kOpenTokens) merge_open_tokens();
}

void LshTables::merge_open_tokens() {
  if (blocks_.empty() || blocks_.back().size == kBlockTokens) blocks_.emplace_back();
  const Block& old = blocks_.back();
  const size_t buckets = size_t{1} << bits_, stride = buckets + 1, open = narrow_[0].size();
  Block merged;
  merged.size = old.size + open;
  merged.starts.resize(static_cast<size_t>(tables_) * stride);
  merged.ids.resize(static_cast<size_t>(tables_) * merged.size);
  std::vector<uint16_t> open_starts(stride), next(buckets);
  for (size_t t = 0; t < static_cast<size_t>(tables_); ++t) {
    // Counting sort of the open tokens by bucket.
    const std::vector<uint16_t>& codes = narrow_[t];
    std::fill(open_starts.begin(), open_starts.end(), uint16_t{0});
    for (const uint16_t code : codes) ++open_starts[code + 1];
    for (size_t b = 0; b < buckets; ++b) open_starts[b + 1] = static_cast<uint16_t>(open_starts[b + 1] + open_starts[b]);
    // Bucket b of the merged block: the old block's run, then the open tokens in b (ids after it).
    const uint16_t* old_starts = old.size ? old.starts.data() + t * stride : nullptr;
    uint16_t* starts = merged.starts.data() + t * stride;
    uint16_t* ids = merged.ids.data() + t * merged.size;
    for (size_t b = 0; b <= buckets; ++b) {
      starts[b] = static_cast<uint16_t>((old_starts ? old_starts[b] : 0) + open_starts[b]);
      if (b == buckets) break;
      const size_t old_run = old_starts ? static_cast<size_t>(old_starts[b + 1] - old_starts[b]) : 0;
      if (old_run) std::copy_n(old.ids.data() + t * old.size + old_starts[b], old_run, ids + starts[b]);
      next[b] = static_cast<uint16_t>(starts[b] + old_run);
    }
    for (size_t i = 0; i < open; ++i) ids[next[codes[i]]++] = static_cast<uint16_t>(old.size + i);
    narrow_[t].clear();
  }
  blocks_.back() = std::move(merged);
}

template <typename Code>
void LshTables::count_open(const std::vector<std::vector<Code>>& columns, const uint32_t* query_codes,
                           std::vector<uint16_t>& counts) const {
  for (size_t t = 0; t < columns.size(); ++t) {
    const Code code = static_cast<Code>(query_codes[t]);
    const Code* column = columns[t].data();
    for (size_t i = 0; i < counts.size(); ++i) counts[i] = static_cast<uint16_t>(counts[i] + (column[i] == code));
  }
}

std::vector<uint32_t> LshTables::colliding(const uint32_t* query_codes, int hits) const {
  std::vector<uint32_t> found;
  const size_t stride = (size_t{1} << bits_) + 1, tables = static_cast<size_t>(tables_);
  // Per-thread scratch, all zero between calls (each call resets what it touched): a block's
  // counts are 120 KB, too much to allocate and clear per query.
  thread_local std::vector<uint16_t> counts;
  thread_local std::vector<uint64_t> found_bits;
  if (!blocks_.empty() && counts.size() < kBlockTokens) {
    counts.assign(kBlockTokens, 0);
    found_bits.assign(kBlockTokens / 64, 0);
  }
  std::vector<const uint16_t*> runs(2 * tables);  // per table: first and end of the query's bucket
  for (size_t b = 0; b < blocks_.size(); ++b) {
    // The look-ups are independent: issue them all before using any (a long context's index is
    // far larger than the core's caches, so each is a miss), then count.
    const Block& block = blocks_[b];
    for (size_t t = 0; t < tables; ++t) __builtin_prefetch(block.starts.data() + t * stride + query_codes[t]);
    for (size_t t = 0; t < tables; ++t) {
      const uint16_t* starts = block.starts.data() + t * stride + query_codes[t];
      const uint16_t* ids = block.ids.data() + t * block.size;
      runs[2 * t] = ids + starts[0];
      runs[2 * t + 1] = ids + starts[1];
      for (const uint16_t* line = runs[2 * t]; line < runs[2 * t + 1]; line += 32) __builtin_prefetch(line);
      __builtin_prefetch(runs[2 * t + 1] - 1);
    }
    // Counts per token, then a second pass over the same runs marks the tokens that reached
    // `hits` in a bitmap read in order and resets their counts: no pass over the whole block, no
    // branch per id.
    uint16_t* count = counts.data();
    for (size_t t = 0; t < tables; ++t)
      for (const uint16_t* id = runs[2 * t]; id < runs[2 * t + 1]; ++id) ++count[*id];
    for (size_t t = 0; t < tables; ++t)
      for (const uint16_t* id = runs[2 * t]; id < runs[2 * t + 1]; ++id) {
        found_bits[*id >> 6] |= static_cast<uint64_t>(count[*id] >= hits) << (*id & 63);
        count[*id] = 0;
      }
    const uint32_t first = static_cast<uint32_t>(b * kBlockTokens);
    const size_t words = (block.size + 63) / 64;
    for (size_t w = 0; w < words; ++w) {
      for (uint64_t bits = found_bits[w]; bits; bits &= bits - 1)
        found.push_back(first + static_cast<uint32_t>(64 * w + static_cast<size_t>(__builtin_ctzll(bits))));
      found_bits[w] = 0;
    }
  }
  const size_t in_blocks = blocks_.empty() ? 0 : (blocks_.size() - 1) * kBlockTokens + blocks_.back().size;
  const size_t open = tokens_ - in_blocks;
  std::vector<uint16_t> open_counts(open, 0);
  if (bits_ <= 16)
    count_open(narrow_, query_codes, open_counts);
  else
    count_open(wide_, query_codes, open_counts);
  for (size_t i = 0; i < open; ++i)
    if (open_counts[i] >= hits) found.push_back(static_cast<uint32_t>(in_blocks + i));
  return found;
}

size_t LshTables::bytes() const {
  size_t total = 0;
  for (const Block& block : blocks_) total += (block.starts.capacity() + block.ids.capacity()) * sizeof(uint16_t);
  for (const auto& column : narrow_) total += column.capacity() * sizeof(uint16_t);
  for (const auto& column : wide_) total += column.capacity() * sizeof(uint32_t);
  return total;
}

}  // namespace kvsketch
