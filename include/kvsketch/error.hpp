// kvsketch::Error: the one exception type thrown at API boundaries. Messages name the argument,
// the value received and what was expected.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace kvsketch {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Throws Error with a fmt-formatted message when `condition` is false.
template <typename... Args>
inline void require(bool condition, fmt::format_string<Args...> format, Args&&... args) {
  if (!condition) throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace kvsketch
