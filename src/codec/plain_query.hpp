// The prepared query of codecs that score in the original domain (fp16, int8, KIVI, q4_0): q itself.
#pragma once
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

}  // namespace kvsketch
