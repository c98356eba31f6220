#include "sparse/lsh_tables.hpp"

#include "kvsketch/error.hpp"

namespace kvsketch {

namespace {
constexpr int kMostBucketedBits = 12;  // 2^12 + 1 starts per table and block: as many bytes as the ids
}


LshTables::LshTables(int bits, int tables) : bits_(bits), tables_(tables), bucketed_(bits <= kMostBucketedBits) {
  require(bits >= 1 && bits <= 32 && tables >= 1, "lsh tables: bad shape K={} L={}", bits, tables);
  if (bits <= 16)
    narrow_.resize(static_cast<size_t>(tables));
  else
    wide_.resize(static_cast<size_t>(tables));
}

void LshTables::add(const uint32_t* codes) {
  for (size_t t = 0; t < static_cast<size_t>(tables_); ++t) {
    if (bits_ <= 16) {
      push_back_in_steps(narrow_[t], static_cast<uint16_t>(codes[t]));
    } else {
      push_back_in_steps(wide_[t], codes[t]);
    }
  }
  ++tokens_;
  if (bucketed_ && narrow_[0].size() == kBlockTokens) close_open_block();
}

void LshTables::close_open_block() {
  const size_t buckets = size_t{1} << bits_, stride = buckets + 1;
  Block block;
  block.starts.assign(static_cast<size_t>(tables_) * stride, 0);
  block.ids.resize(static_cast<size_t>(tables_) * kBlockTokens);
  for (size_t t = 0; t < static_cast<size_t>(tables_); ++t) {
    // Counting sort of the block's tokens by bucket; ids stay ascending within a bucket.
    uint16_t* starts = block.starts.data() + t * stride;
    const std::vector<uint16_t>& codes = narrow_[t];
    for (const uint16_t code : codes) ++starts[code + 1];
    for (size_t b = 0; b < buckets; ++b) starts[b + 1] = static_cast<uint16_t>(starts[b + 1] + starts[b]);
    std::vector<uint16_t> next(starts, starts + buckets);
    uint16_t* ids = block.ids.data() + t * kBlockTokens;
    for (size_t i = 0; i < codes.size(); ++i) ids[next[codes[i]]++] = static_cast<uint16_t>(i);
    narrow_[t].clear();
    narrow_[t].shrink_to_fit();
  }
  blocks_.push_back(std::move(block));
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
  const size_t stride = (size_t{1} << bits_) + 1;
  std::vector<uint16_t> counts(kBlockTokens);
  for (size_t b = 0; b < blocks_.size(); ++b) {
    std::fill(counts.begin(), counts.end(), uint16_t{0});
    const Block& block = blocks_[b];
    for (size_t t = 0; t < static_cast<size_t>(tables_); ++t) {
      const uint16_t* starts = block.starts.data() + t * stride + query_codes[t];
      const uint16_t* ids = block.ids.data() + t * kBlockTokens;
      for (uint16_t i = starts[0]; i < starts[1]; ++i) ++counts[ids[i]];
    }
    const uint32_t first = static_cast<uint32_t>(b * kBlockTokens);
    for (size_t i = 0; i < kBlockTokens; ++i)
      if (counts[i] >= hits) found.push_back(first + static_cast<uint32_t>(i));
  }
  const size_t open = tokens_ - blocks_.size() * kBlockTokens;
  counts.assign(open, 0);
  if (bits_ <= 16)
    count_open(narrow_, query_codes, counts);
  else
    count_open(wide_, query_codes, counts);
  const uint32_t first = static_cast<uint32_t>(blocks_.size() * kBlockTokens);
  for (size_t i = 0; i < open; ++i)
    if (counts[i] >= hits) found.push_back(first + static_cast<uint32_t>(i));
  return found;
}

size_t LshTables::bytes() const {
  size_t total = 0;
  for (const Block& block : blocks_)
    total += (block.starts.capacity() + block.ids.capacity()) * sizeof(uint16_t);
  for (const auto& column : narrow_) total += column.capacity() * sizeof(uint16_t);
  for (const auto& column : wide_) total += column.capacity() * sizeof(uint32_t);
  return total;
}

}  // namespace kvsketch
