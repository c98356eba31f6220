// MergeAndReduce (BalanceKV, Algorithm 4): a binary counter of levels over a token stream. A full
// batch of t tokens at level l is halved by the balancing walk into level l + 1, where two halves
// make a batch; tokens that reach the last level T stay there. A token at level l stands for 2^l.
// Memory: the tokens of level T plus at most t per lower level.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "sparse/balancing_walk.hpp"

namespace kvsketch {

struct LevelledToken {
  uint32_t id;
  int level;
};

class MergeAndReduce {
 public:
  // `tag` names this instance's random streams (one per halving below it).
  MergeAndReduce(int levels, size_t batch, WalkValues values, double gain, double temperature, uint64_t seed,
                 std::vector<uint64_t> tag);
  void add(WalkToken token);
  // Every held token with its level, ascending by id.
  std::vector<LevelledToken> kept() const;
  size_t held_tokens() const;
  // Ids and levels (5 bytes per token) plus the float K/V copies of tokens below the last level.
  size_t bytes() const;

 private:
  int levels_;
  size_t batch_;
  WalkValues values_;
  double gain_, temperature_;
  uint64_t seed_;
  std::vector<uint64_t> tag_;
  uint64_t halvings_ = 0;
  std::vector<std::vector<WalkToken>> pending_;  // levels 0..T-1
  std::vector<uint32_t> final_;                  // ids at level T
};

}  // namespace kvsketch
