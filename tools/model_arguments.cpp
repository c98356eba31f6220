#include "model_arguments.hpp"

#include "core/require.hpp"
#include "list_options.hpp"

namespace kvsketch::tools {

std::vector<std::string> split_policies(const std::string& text) {
  auto out = split_list(text, ';');
  require(!out.empty(), "--policies: no policy given");
  return out;
}

std::vector<size_t> parse_token_counts(const std::string& text, const char* option) {
  std::vector<size_t> out;
  for (const std::string& item : split_list(text, ',')) {
    size_t used = 0;
    unsigned long long value = 0;
    try {
      value = std::stoull(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    const bool kilo = used + 1 == item.size() && (item.back() == 'k' || item.back() == 'K');
    require(used > 0 && (used == item.size() || kilo) && value > 0 && value <= (1ull << 24),
            "{}: '{}' is not a token count (a positive integer, k = 1024, up to 16M)", option, item);
    out.push_back(static_cast<size_t>(kilo ? value * 1024 : value));
  }
  require(!out.empty(), "{}: no values given", option);
  return out;
}

std::vector<double> parse_fractions(const std::string& text, const char* option) {
  std::vector<double> out;
  for (const std::string& item : split_list(text, ',')) {
    size_t used = 0;
    double value = -1;
    try {
      value = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    require(used == item.size() && value >= 0 && value <= 1, "{}: '{}' is not a number in [0, 1]", option, item);
    out.push_back(value);
  }
  require(!out.empty(), "{}: no values given", option);
  return out;
}

}  // namespace kvsketch::tools
