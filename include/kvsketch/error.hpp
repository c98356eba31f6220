// kvsketch::Error: the one exception type thrown at API boundaries. Messages name the argument,
// the value received and what was expected.
#pragma once
#include <stdexcept>
#include <string>

// The library is built with hidden visibility: what this header declares is its exported API.
#pragma GCC visibility push(default)
namespace kvsketch {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace kvsketch
#pragma GCC visibility pop
