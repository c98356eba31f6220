// The prepared query of codecs that score in the original domain (fp16, int8, KIVI, q4_0): q itself.
#pragma once
#include <algorithm>
#include <memory>
#include <typeinfo>
#include <vector>

#include "core/kernel_memory.hpp"
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

// Refills a plain query of the same size with q (PreparedQuery::reprepare_query).
inline bool replain_query(const float* q, size_t dim, PreparedQuery& into) {
  if (typeid(into) != typeid(PlainQuery)) return false;
  auto& values = static_cast<PlainQuery&>(into).values;
  if (values.size() != dim) return false;
  std::copy_n(q, dim, values.data());
  return true;
}

// The plain queries of a GQA group's heads, one after another (heads x dim), as the row kernels take
// them.
inline KernelVector<float> stacked_plain_queries(const PreparedQuery* const* queries, size_t heads, size_t dim) {
  KernelVector<float> stacked(heads * dim);
  for (size_t h = 0; h < heads; ++h)
    std::copy_n(static_cast<const PlainQuery&>(*queries[h]).values.data(), dim, stacked.data() + h * dim);
  return stacked;
}

}  // namespace kvsketch
