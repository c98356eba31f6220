#include "list_options.hpp"

#include <charconv>

#include "core/require.hpp"

namespace kvsketch::tools {

std::vector<std::string> split_list(const std::string& text, char separator) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = text.find(separator, start);
    const std::string item = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!item.empty()) items.push_back(item);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return items;
}

CLI::Validator NonEmptyList(char separator) {
  return CLI::Validator(
      [separator](std::string& text) {
        return split_list(text, separator).empty() ? std::string("give at least one item") : std::string();
      },
      "LIST");
}

std::vector<size_t> parse_sizes(const std::string& text, const char* option) {
  std::vector<size_t> sizes;
  for (const std::string& item : split_list(text, ',')) {
    size_t value = 0;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), value);
    require(error == std::errc() && end == item.data() + item.size() && value > 0,
            "{}: '{}' is not a positive integer", option, item);
    sizes.push_back(value);
  }
  require(!sizes.empty(), "{}: give at least one value", option);
  return sizes;
}

}  // namespace kvsketch::tools
