// UTF-8 helpers of the tokenizer: code point iteration, encoding, validity, lossy decoding.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvsketch::model::utf8 {

// Length of the UTF-8 sequence starting at s[at] (1 for a byte that does not start a valid one).
size_t sequence_length(std::string_view s, size_t at);
// The code point starting at s[at], and its length in bytes; s must be valid UTF-8.
char32_t decode(std::string_view s, size_t at, size_t* length);
void append(std::string& out, char32_t code_point);
// The offset of the first byte that is not valid UTF-8, or npos.
size_t first_invalid(std::string_view s);
// s with every invalid sequence replaced by U+FFFD, as Rust's String::from_utf8_lossy.
std::string lossy(std::string_view s);

}  // namespace kvsketch::model::utf8
