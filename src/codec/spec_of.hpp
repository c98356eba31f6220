// A codec's spec string as a fmt argument that is built only when a message is formatted:
// require() evaluates its arguments on every call, and spec() formats a string (a decode step's
// checks built 16 of them, a third of the step's allocations).
#pragma once
#include <fmt/format.h>

#include <string_view>

#include "kvsketch/codec.hpp"

namespace kvsketch {

struct SpecOf {
  const VectorCodec& codec;
};

}  // namespace kvsketch

template <>
struct fmt::formatter<kvsketch::SpecOf> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(const kvsketch::SpecOf& spec, FormatContext& context) const {
    return fmt::formatter<std::string_view>::format(spec.codec.spec(), context);
  }
};
