// BalanceKV's streaming selection as a TokenSelector (see balancekv.cpp for the decisions).
#pragma once
#include <cstdint>
#include <vector>

#include "kvsketch/sparse_attention.hpp"

namespace kvsketch {

class BalanceKV final : public TokenSelector {
 public:
  // levels = T (compression 1 / 2^T), batch = t, gain of the walk (0: uniform random halving),
  // temperature of the kernel's exponent (1: the paper's kernel).
  BalanceKV(size_t dim, int levels, size_t batch, double gain, double temperature, uint64_t seed);
  std::string spec() const override;
  std::unique_ptr<TokenSelector> clone() const override { return std::make_unique<BalanceKV>(*this); }
  void append(const float* keys, const float* values, size_t n) override;
  size_t tokens() const override { return tokens_; }
  // Every kept token, with log weight level * ln 2 (the same for every query).
  TokenSelection select(const float* query, const BodyView& body, uint64_t draw) const override;
  // Kept ids and levels (5 bytes each) plus the float K/V of tokens still below level T.
  size_t index_bytes() const override;
  // Tokens held: n / 2^T at the last level plus at most t per lower level (O(t log(n / t))).
  size_t memory_tokens() const;

 private:
  struct Token {
    uint32_t id;
    std::vector<float> key, value;
  };
  // SoftmaxBalance: the positions in batch of the smaller sign class of the self-balancing walk.
  std::vector<size_t> halve(const std::vector<Token>& batch, uint64_t stream) const;

  size_t dim_;
  int levels_;
  size_t batch_;
  double gain_, temperature_;
  uint64_t seed_;
  size_t tokens_ = 0;
  uint64_t batches_ = 0;                    // halvings so far: the walk's random stream
  std::vector<std::vector<Token>> pending_;  // levels 0..T-1
  std::vector<uint32_t> final_;              // ids at level T
};

}  // namespace kvsketch
