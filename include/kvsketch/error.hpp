// kvsketch::Error: the one exception type thrown at API boundaries. Messages name the argument,
// the value received and what was expected.
#pragma once
#include <stdexcept>
#include <string>

namespace kvsketch {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace kvsketch
