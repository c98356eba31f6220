#include "codec/spec_parser.hpp"

#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <string_view>

#include "core/require.hpp"

namespace kvsketch {

std::string unwrapped_spec(const std::string& spec) {
  size_t start = 0;
  bool centered = false, rotated = false;
  while (true) {
    const std::string_view rest = std::string_view(spec).substr(start);
    bool* seen = rest.starts_with("center:")   ? &centered
                 : rest.starts_with("rotate:") ? &rotated
                                               : nullptr;
    if (!seen) return spec.substr(start);
    // Centring twice changes nothing, and a rotation of a rotation is one: each wrapper once.
    require(!*seen, "codec '{}': '{}' is given twice; each of center: and rotate: wraps a spec at most once",
            spec, rest.substr(0, rest.find(':') + 1));
    *seen = true;
    start += rest.find(':') + 1;
  }
}

ParsedSpec parse_spec(const std::string& spec, const std::string& kind) {
  ParsedSpec parsed;
  const size_t colon = spec.find(':');
  parsed.name = spec.substr(0, colon);
  if (colon == std::string::npos) return parsed;
  const std::string rest = spec.substr(colon + 1);
  size_t start = 0;
  while (start <= rest.size()) {
    size_t comma = rest.find(',', start);
    if (comma == std::string::npos) comma = rest.size();
    const std::string item = rest.substr(start, comma - start);
    const size_t equals = item.find('=');
    require(!item.empty() && equals != std::string::npos && equals > 0 && equals + 1 < item.size(),
            "{} spec '{}': expected key=value items after ':', got '{}'", kind, spec, item);
    const std::string key = item.substr(0, equals);
    require(!parsed.values.count(key), "{} spec '{}': parameter '{}' given twice", kind, spec, key);
    parsed.values[key] = item.substr(equals + 1);
    start = comma + 1;
  }
  return parsed;
}

SpecParameters::SpecParameters(const std::string& name, const std::map<std::string, std::string>& values,
                               const std::vector<std::string>& allowed, const std::string& kind)
    : label_(fmt::format("{} '{}'", kind, name)), values_(values) {
  for (const auto& [key, value] : values)
    require(std::find(allowed.begin(), allowed.end(), key) != allowed.end(),
            "{}: unknown parameter '{}'; valid parameters: {}", label_, key,
            allowed.empty() ? std::string("none") : fmt::format("{}", fmt::join(allowed, ", ")));
}

double SpecParameters::real(const std::string& key, double fallback, double min, double max) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  require(used == it->second.size() && used > 0 && std::isfinite(value), "{}: parameter {}='{}' is not a number", label_,
          key, it->second);
  require(value >= min && value <= max, "{}: parameter {}={} out of range; expected {}..{}", label_, key, value, min,
          max);
  return value;
}

int64_t SpecParameters::integer(const std::string& key, int64_t fallback, int64_t min, int64_t max) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  require(used == it->second.size() && used > 0, "{}: parameter {}='{}' is not an integer", label_, key,
          it->second);
  require(value >= min && value <= max, "{}: parameter {}={} out of range; expected {}..{}", label_, key, value, min,
          max);
  return value;
}

uint64_t SpecParameters::seed(const std::string& key, uint64_t fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  uint64_t value = 0;
  const std::string& text = it->second;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  require(!text.empty() && error == std::errc() && end == text.data() + text.size(),
          "{}: parameter {}='{}' is not a seed (an integer in 0..{})", label_, key, text, UINT64_MAX);
  return value;
}

std::string SpecParameters::choice(const std::string& key, const std::string& fallback,
                                   const std::vector<std::string>& valid) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  require(std::find(valid.begin(), valid.end(), it->second) != valid.end(),
          "{}: parameter {}='{}' is not valid; expected one of {}", label_, key, it->second,
          fmt::join(valid, ", "));
  return it->second;
}

}  // namespace kvsketch
