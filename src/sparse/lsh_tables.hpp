// The L hash tables of MagicPIG over a growing token stream, answering "which tokens share their
// bucket with the query in at least `hits` tables" without touching the tokens that do not.
//
// Layout: tokens are grouped in closed blocks of kBlockTokens. A closed block keeps, per table, its
// token ids (u16, local to the block) sorted by bucket and the start of each bucket (u16): a query
// reads one short run of ids per table and block. The newest tokens (fewer than a block) keep their
// raw codes per table and are matched by comparing codes. Closing a block is a counting sort of its
// own tokens; nothing older is touched, so appends never rebuild.
//
// Bytes per token at (K, L) = (10, 150): 2 L for the ids and L (2^K + 1) 2 / kBlockTokens = 75 for
// the bucket starts. For K > 12 the bucket starts would outweigh the ids, and every block keeps its
// raw codes instead (2 L bytes per token for K <= 16, else 4 L), matched code by code.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvsketch {

class LshTables {
 public:
  static constexpr size_t kBlockTokens = 4096;
  static constexpr size_t kGrowthStep = 256;  // per-token buffers grow by this many tokens at a time

  LshTables(int bits, int tables);
  // One token's codes, one per table (each below 2^bits).
  void add(const uint32_t* codes);
  size_t tokens() const { return tokens_; }
  // Tokens (ascending) that share the query's bucket in at least `hits` tables.
  std::vector<uint32_t> colliding(const uint32_t* query_codes, int hits) const;
  // Everything held, at capacity (per-token buffers grow in steps of kGrowthStep tokens).
  size_t bytes() const;
  bool bucketed() const { return bucketed_; }

 private:
  struct Block {
    std::vector<uint16_t> starts;  // table-major, 2^bits + 1 per table
    std::vector<uint16_t> ids;     // table-major, kBlockTokens per table, sorted by bucket
  };
  void close_open_block();
  template <typename Code>
  void count_open(const std::vector<std::vector<Code>>& columns, const uint32_t* query_codes,
                  std::vector<uint16_t>& counts) const;

  int bits_, tables_;
  bool bucketed_;
  size_t tokens_ = 0;
  std::vector<Block> blocks_;
  // Raw codes per table of the open block (all tokens when not bucketed): u16 for K <= 16.
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
