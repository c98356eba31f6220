// Values the commands' JSON rows share.
#pragma once
#include <nlohmann/json.hpp>

#include <optional>

namespace kvsketch::tools {

// A speed-up for JSON: null where none was measured (0: fp16 was not among the policies run).
inline nlohmann::json measured_ratio(double ratio) { return ratio > 0.0 ? nlohmann::json(ratio) : nlohmann::json(); }

// A value that may not apply: null where it does not.
inline nlohmann::json optional_json(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json();
}

}  // namespace kvsketch::tools
