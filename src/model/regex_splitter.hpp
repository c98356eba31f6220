// A compiled Oniguruma regex (the engine Hugging Face tokenizers use) over UTF-8, giving the byte
// ranges of its successive non-overlapping matches.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvsketch::model {

class Regex {
 public:
  // Throws Error naming `where` and Oniguruma's message when the pattern does not compile.
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // [begin, end) of every match, left to right (an empty match advances one character).
  std::vector<std::pair<size_t, size_t>> matches(std::string_view text) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kvsketch::model
