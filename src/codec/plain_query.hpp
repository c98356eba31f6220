// The prepared query of codecs that score in the original domain (fp16, int8, KIVI, q4_0): q itself.
#pragma once
#include <algorithm>
#include <memory>
#include <vector>

#include "kvsketch/codec.hpp"

namespace kvsketch {

struct PlainQuery : PreparedQuery {
  std::vector<float> values;
};

inline std::unique_ptr<PreparedQuery> plain_query(const float* q, size_t dim) {
  auto prepared = std::make_unique<PlainQuery>();
  prepared->values.assign(q, q + dim);
  return prepared;
}

// The plain queries of a GQA group's heads, one after another (heads x dim), as the row kernels take
// them.
inline std::vector<float> stacked_plain_queries(const PreparedQuery* const* queries, size_t heads, size_t dim) {
  std::vector<float> stacked(heads * dim);
  for (size_t h = 0; h < heads; ++h)
    std::copy_n(static_cast<const PlainQuery&>(*queries[h]).values.data(), dim, stacked.data() + h * dim);
  return stacked;
}

}  // namespace kvsketch
