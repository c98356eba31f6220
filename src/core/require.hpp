// require(): throws kvsketch::Error with a fmt-formatted message when a condition is false. The
// library's own checks; not part of the public headers, which do not force fmt on their users.
#pragma once
#include <fmt/format.h>

#include <utility>

#include "kvsketch/error.hpp"

namespace kvsketch {

template <typename... Args>
inline void require(bool condition, fmt::format_string<Args...> format, Args&&... args) {
  if (!condition) throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace kvsketch
