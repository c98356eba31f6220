// The L hash tables of MagicPIG over a growing token stream, answering "which tokens share their
// bucket with the query in at least `hits` tables" without touching the tokens that do not.
//
// Layout (K <= 12): tokens live in blocks of up to kBlockTokens. A block keeps, per table, its
// token ids (u16, local to the block) sorted by bucket and the start of each bucket (u16), so a
// query reads one short run of ids per table and block: a few cache misses per table, not one per
// token. The newest tokens (fewer than kOpenTokens) keep their raw codes per table and are matched
// by comparing codes; when kOpenTokens have gathered they are merged into the last block (a linear
// merge of that block's runs with a counting sort of the new tokens: amortized O(L kBlockTokens /
// kOpenTokens) per token, never a rebuild of the index).
//
// Bytes per token at (K, L) = (10, 150): 2 L for the ids plus the bucket starts, L (2^K + 1) 2 per
// block (5 per token in a full block). For K > 12 the bucket starts would outweigh the ids, and
// all tokens keep their raw codes (2 L bytes per token for K <= 16, else 4 L), matched by comparing.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvsketch {

class LshTables {
 public:
  static constexpr size_t kBlockTokens = 61440;  // 60 x kOpenTokens; bucket starts fit in u16
  static constexpr size_t kOpenTokens = 1024;
  static constexpr size_t kGrowthStep = 256;     // unbucketed buffers grow by this many tokens at a time
  static constexpr int kMostBucketedBits = 12;   // beyond, the bucket starts of a small block outweigh its ids

  LshTables(int bits, int tables);
  // One token's codes, one per table (each below 2^bits).
  void add(const uint32_t* codes);
  size_t tokens() const { return tokens_; }
  // Tokens (ascending) that share the query's bucket in at least `hits` tables.
  std::vector<uint32_t> colliding(const uint32_t* query_codes, int hits) const;
  // Everything held, at capacity.
  size_t bytes() const;
  bool bucketed() const { return bucketed_; }

 private:
  struct Block {
    size_t size = 0;
    std::vector<uint16_t> starts;  // table-major, 2^bits + 1 per table
    std::vector<uint16_t> ids;     // table-major, size per table, sorted by bucket then id
  };
  void merge_open_tokens();
  template <typename Code>
  void count_open(const std::vector<std::vector<Code>>& columns, const uint32_t* query_codes,
                  std::vector<uint16_t>& counts) const;

  int bits_, tables_;
  bool bucketed_;
  size_t tokens_ = 0;
  std::vector<Block> blocks_;
  // Raw codes per table of the open tokens (all tokens when not bucketed): u16 for K <= 16.
  std::vector<std::vector<uint16_t>> narrow_;
  std::vector<std::vector<uint32_t>> wide_;
};

// Capacity grows by a quarter, rounded up to whole steps of LshTables::kGrowthStep: the bytes
// reported for a given count are what it holds, whatever the standard library's growth policy.
template <typename T>
void push_back_in_steps(std::vector<T>& column, T value) {
  if (column.size() == column.capacity()) {
    const size_t step = LshTables::kGrowthStep, wanted = column.size() + column.size() / 4 + 1;
    column.reserve((wanted + step - 1) / step * step);
  }
  column.push_back(value);
}

}  // namespace kvsketch
