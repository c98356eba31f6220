// BalanceKV's streaming selection as a TokenSelector (see balancekv.cpp for the decisions).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "kvsketch/sparse_attention.hpp"
#include "sparse/merge_and_reduce.hpp"

namespace kvsketch {

enum class BalanceMode {
  kJoint,    // one MergeAndReduce over [v ; alpha]: one subset for numerator and denominator
  kPaper,    // Algorithm 1: numerator instances per value-norm bucket, a separate denominator instance
  kPrefill,  // the experiments' practical variant: T global halvings of blocks, exactly half each time
};

// The walk's default gain (see balancekv.cpp): each sign opposes the running sum.
inline constexpr double kDefaultBalanceGain = 1e6;

class BalanceKV final : public TokenSelector {
 public:
  // levels = T (compression 1 / 2^T), batch = t (the block b of the practical variant), gain of the
  // walk (0: uniform random halving), temperature of the kernel's exponent (1: the paper's kernel).
  BalanceKV(size_t dim, int levels, size_t batch, double gain, double temperature, uint64_t seed,
            BalanceMode mode = BalanceMode::kJoint);
  std::string spec() const override;
  std::unique_ptr<TokenSelector> clone() const override { return std::make_unique<BalanceKV>(*this); }
  void append(const float* keys, const float* values, size_t n) override;
  size_t tokens() const override { return tokens_; }
  // Every kept token, with log weight level * ln 2 (the same for every query); in the paper mode
  // the denominator's own subset and weights too.
  TokenSelection select(const float* query, const BodyView& body, uint64_t draw) const override;
  // Kept ids and levels (5 bytes each) plus the float K/V of tokens still below level T.
  size_t index_bytes() const override;
  // Tokens held (the union over instances counted once per instance).
  size_t memory_tokens() const;

 private:
  void add_paper(WalkToken token);
  void compress_segment(std::vector<WalkToken> segment);

  size_t dim_;
  int levels_;
  size_t batch_;
  double gain_, temperature_;
  uint64_t seed_;
  BalanceMode mode_;
  size_t tokens_ = 0;
  // kJoint
  std::optional<MergeAndReduce> joint_;
  // kPaper: numerator instance i holds the tokens with 2^(i-1) <= ||v|| < 2^i.
  std::map<int, MergeAndReduce> numerators_;
  std::optional<MergeAndReduce> denominator_;
  double largest_value_norm_ = 0.0, largest_key_norm_ = 0.0;
  // kPrefill: ids kept at weight 2^T, and the raw tokens of the segment being gathered.
  std::vector<uint32_t> compressed_;
  std::vector<WalkToken> raw_;
  uint64_t segments_ = 0;
};

}  // namespace kvsketch
