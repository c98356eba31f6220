// Parsing of list-valued command-line options ("a;b;c", "4096,16384").
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace kvsketch::tools {

// Non-empty items of `text` separated by `separator`.
std::vector<std::string> split_list(const std::string& text, char separator);
// For list options whose absence means a default list: given, the option must name at least one
// item (an empty --policies '' is refused, not read as "the default").
CLI::Validator NonEmptyList(char separator);
// Positive integers separated by commas; an error names `option` and the bad item.
std::vector<size_t> parse_sizes(const std::string& text, const char* option);

}  // namespace kvsketch::tools
