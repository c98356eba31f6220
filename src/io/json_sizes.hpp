// A JSON array of sizes (a safetensors shape or data_offsets), read strictly: nlohmann's get<>
// would convert 1e40 or -3 to size_t (undefined behaviour, or a wrapped value) where a file holds
// them; here anything but non-negative integers within 64 bits is refused, naming `what`.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/require.hpp"

namespace kvsketch {

inline std::vector<uint64_t> json_sizes(const nlohmann::json& value, const std::string& what) {
  require(value.is_array(), "{} is {}; expected an array of non-negative integers", what, value.dump());
  std::vector<uint64_t> sizes;
  for (const auto& item : value) {
    require(item.is_number_unsigned() || (item.is_number_integer() && item.get<int64_t>() >= 0),
            "{} holds {}; expected non-negative integers", what, item.dump());
    sizes.push_back(item.get<uint64_t>());
  }
  return sizes;
}

}  // namespace kvsketch
