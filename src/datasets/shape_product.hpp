// The element count of an array whose dimensions come from a file's header, refused where the
// product (or the product times the element's bytes) does not fit in size_t: a crafted header must
// not wrap to a small size that passes the length checks and leaves rows x cols above the values.
#pragma once
#include <fmt/ranges.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/require.hpp"

namespace kvsketch {

inline size_t shape_product(const std::string& path, const std::vector<uint64_t>& dims, size_t element_bytes) {
  size_t count = 1, bytes = 0;
  bool overflow = false;
  for (const uint64_t d : dims) overflow |= __builtin_mul_overflow(count, d, &count);
  overflow |= __builtin_mul_overflow(count, element_bytes, &bytes);
  require(!overflow, "'{}': shape [{}] is too large: its size overflows 64 bits", path, fmt::join(dims, ", "));
  return count;
}

}  // namespace kvsketch
