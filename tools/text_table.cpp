#include "text_table.hpp"

#include <algorithm>

#include "core/require.hpp"

namespace kvsketch::tools {
namespace {

// Characters on screen: UTF-8 continuation bytes (a '±') take no column of their own.
size_t display_width(const std::string& text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

}  // namespace

TextTable::TextTable(std::vector<std::string> headers) {
  for (std::string& header : headers) {
    left_.push_back(!header.empty() && header[0] == '<');
    headers_.push_back(left_.back() ? header.substr(1) : header);
  }
}

void TextTable::add(std::vector<std::string> cells) {
  require(cells.size() == headers_.size(), "table: a row of {} cells under {} headers", cells.size(), headers_.size());
  rows_.push_back(std::move(cells));
}

void TextTable::print(std::ostream& out) const {
  std::vector<size_t> widths(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) {
    widths[c] = display_width(headers_[c]);
    for (const auto& row : rows_) widths[c] = std::max(widths[c], display_width(row[c]));
  }
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(widths[c] - display_width(cells[c]), ' ');
      if (c) text += "  ";
      text += left_[c] ? cells[c] + (c + 1 < cells.size() ? pad : "") : pad + cells[c];
    }
    out << text << "\n";
  };
  line(headers_);
  for (const auto& row : rows_) line(row);
}

}  // namespace kvsketch::tools
