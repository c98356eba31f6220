// The inner codec's prepared queries of a wrapping codec's (rotate:, center:), as the array its
// multi-head kernels take, without a heap allocation for the usual head counts: decode calls it
// for every block of every step.
#pragma once
#include <array>
#include <cstddef>
#include <vector>

#include "kvsketch/codec.hpp"

namespace kvsketch {

template <typename OuterQuery>
class InnerQueries {
 public:
  InnerQueries(const PreparedQuery* const* queries, size_t heads) {
    const PreparedQuery** out = inline_.data();
    if (heads > inline_.size()) {
      spill_.resize(heads);
      out = spill_.data();
    }
    for (size_t h = 0; h < heads; ++h) out[h] = static_cast<const OuterQuery&>(*queries[h]).inner.get();
    data_ = out;
  }
  const PreparedQuery* const* data() const { return data_; }

 private:
  std::array<const PreparedQuery*, 64> inline_{};
  std::vector<const PreparedQuery*> spill_;  // more than 64 query heads per KV head
  const PreparedQuery* const* data_ = nullptr;
};

}  // namespace kvsketch
