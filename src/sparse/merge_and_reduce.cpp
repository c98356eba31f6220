#include "sparse/merge_and_reduce.hpp"

#include <algorithm>

namespace kvsketch {

MergeAndReduce::MergeAndReduce(int levels, size_t batch, WalkValues values, double gain, double temperature,
                               uint64_t seed, std::vector<uint64_t> tag)
    : levels_(levels),
      batch_(batch),
      values_(values),
      gain_(gain),
      temperature_(temperature),
      seed_(seed),
      tag_(std::move(tag)),
      pending_(static_cast<size_t>(levels)) {}

void MergeAndReduce::add(WalkToken token) {
  pending_[0].push_back(std::move(token));
  for (size_t level = 0; level < pending_.size() && pending_[level].size() >= batch_; ++level) {
    const uint64_t halving = halvings_++;
    std::vector<int> signs;
    if (tag_.size() == 1)
      signs = balancing_walk_signs(pending_[level], values_, gain_, temperature_, seed_, {tag_[0], halving});
    else
      signs = balancing_walk_signs(pending_[level], values_, gain_, temperature_, seed_, {tag_[0], tag_[1], halving});
    std::vector<WalkToken> out;
    for (const size_t i : smaller_sign_class(signs)) out.push_back(std::move(pending_[level][i]));
    pending_[level].clear();
    if (level + 1 == pending_.size()) {
      for (const WalkToken& t : out) final_.push_back(t.id);
    } else {
      for (WalkToken& t : out) pending_[level + 1].push_back(std::move(t));
    }
  }
}

std::vector<LevelledToken> MergeAndReduce::kept() const {
  std::vector<LevelledToken> all;
  for (const uint32_t id : final_) all.push_back({id, levels_});
  for (size_t level = 0; level < pending_.size(); ++level)
    for (const WalkToken& t : pending_[level]) all.push_back({t.id, static_cast<int>(level)});
  std::sort(all.begin(), all.end(), [](const LevelledToken& a, const LevelledToken& b) { return a.id < b.id; });
  return all;
}

size_t MergeAndReduce::held_tokens() const {
  size_t total = final_.size();
  for (const auto& level : pending_) total += level.size();
  return total;
}

size_t MergeAndReduce::bytes() const {
  size_t floats = 0;
  for (const auto& level : pending_)
    for (const WalkToken& t : level) floats += t.key.size() + t.value.size();
  return held_tokens() * 5 + floats * sizeof(float);
}

}  // namespace kvsketch
