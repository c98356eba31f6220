// Plain-text tables whose columns fit their widest cell, whatever the policy or codec names: the
// rows are collected and printed together.
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace kvsketch::tools {

class TextTable {
 public:
  // Headers; a header starting with '<' is a left-aligned column (names), others align right.
  explicit TextTable(std::vector<std::string> headers);
  void add(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> headers_;
  std::vector<bool> left_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace kvsketch::tools
