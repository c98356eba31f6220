// The rows a selection cache feeds its selectors: what the cache holds (fp16), widened back to
// float, so that a selector indexes the keys the attention reads.
#pragma once
#include <cstddef>
#include <vector>

#include "kvsketch/half.hpp"

namespace kvsketch {

// Appends `count` floats from `rows`, each rounded through fp16.
inline void append_as_held(std::vector<float>& into, const float* rows, size_t count) {
  for (size_t i = 0; i < count; ++i) into.push_back(half_to_float(float_to_half(rows[i])));
}

}  // namespace kvsketch
