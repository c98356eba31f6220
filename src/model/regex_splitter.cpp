#include "model/regex_splitter.hpp"

#include <oniguruma.h>

#include <mutex>

#include "core/require.hpp"
#include "model/utf8.hpp"

namespace kvsketch::model {

struct Regex::State {
  OnigRegex regex = nullptr;
};

Regex::Regex(const std::string& pattern, const std::string& where) : state_(std::make_unique<State>()) {
  static std::once_flag initialized;
  std::call_once(initialized, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
  OnigErrorInfo info;
  const auto* p = reinterpret_cast<const OnigUChar*>(pattern.data());
  const int status = onig_new(&state_->regex, p, p + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                              ONIG_SYNTAX_RUBY, &info);
  if (status != ONIG_NORMAL) {
    OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(message, status, &info);
    throw Error(fmt::format("{}: regex '{}' does not compile: {}", where, pattern, reinterpret_cast<char*>(message)));
  }
}

Regex::~Regex() {
  if (state_->regex) onig_free(state_->regex);
}

std::vector<std::pair<size_t, size_t>> Regex::matches(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> found;
  const auto* begin = reinterpret_cast<const OnigUChar*>(text.data());
  const auto* end = begin + text.size();
  std::unique_ptr<OnigRegion, void (*)(OnigRegion*)> region(onig_region_new(),
                                                            [](OnigRegion* r) { onig_region_free(r, 1); });
  size_t at = 0;
  while (at <= text.size()) {
    const int r = onig_search(state_->regex, begin, end, begin + at, end, region.get(), ONIG_OPTION_NONE);
    if (r == ONIG_MISMATCH) break;
    require(r >= 0, "tokenizer regex search failed (Oniguruma status {})", r);
    const auto from = static_cast<size_t>(region->beg[0]), to = static_cast<size_t>(region->end[0]);
    if (to > from) {
      found.emplace_back(from, to);
      at = to;
    } else {
      if (from >= text.size()) break;
      at = from + utf8::sequence_length(text, from);
    }
  }
  return found;
}

}  // namespace kvsketch::model
