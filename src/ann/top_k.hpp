// TopK: the k best (score, row) pairs seen, larger score first and lower row on ties, so that
// merging partial results (row ranges, threads) gives the same answer as one pass.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace kvsketch {

struct ScoredRow {
  float score;
  uint32_t row;
};

inline bool better(const ScoredRow& a, const ScoredRow& b) {
  return a.score > b.score || (a.score == b.score && a.row < b.row);
}

class TopK {
 public:
  explicit TopK(size_t k) : k_(k) { heap_.reserve(k); }
  size_t capacity() const { return k_; }
  // Scores below this cannot enter (ties are decided by push).
  float threshold() const { return heap_.size() < k_ ? -std::numeric_limits<float>::infinity() : heap_.front().score; }
  // A NaN score ranks as -infinity: left as NaN it would break the heap's ordering.
  void push(ScoredRow candidate) {
    if (std::isnan(candidate.score)) candidate.score = -std::numeric_limits<float>::infinity();
    if (heap_.size() < k_) {
      heap_.push_back(candidate);
      std::push_heap(heap_.begin(), heap_.end(), better);  // front: the worst kept
    } else if (better(candidate, heap_.front())) {
      std::pop_heap(heap_.begin(), heap_.end(), better);
      heap_.back() = candidate;
      std::push_heap(heap_.begin(), heap_.end(), better);
    }
  }
  // Best first; leaves the TopK empty.
  std::vector<ScoredRow> take_sorted() {
    std::sort(heap_.begin(), heap_.end(), better);
    return std::move(heap_);
  }

 private:
  size_t k_;
  std::vector<ScoredRow> heap_;
};

}  // namespace kvsketch
