#include "model/utf8.hpp"

namespace kvsketch::model::utf8 {
namespace {

bool continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of a valid sequence at `at`, or 0 (the rules of RFC 3629: no overlongs, no surrogates,
// nothing above U+10FFFF).
size_t valid_length(std::string_view s, size_t at) {
  const auto c = static_cast<unsigned char>(s[at]);
  const size_t left = s.size() - at;
  auto byte = [&](size_t i) { return static_cast<unsigned char>(s[at + i]); };
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return left >= 2 && continuation(byte(1)) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (left < 3 || !continuation(byte(1)) || !continuation(byte(2))) return 0;
    if (c == 0xE0 && byte(1) < 0xA0) return 0;
    if (c == 0xED && byte(1) >= 0xA0) return 0;
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (left < 4 || !continuation(byte(1)) || !continuation(byte(2)) || !continuation(byte(3))) return 0;
    if (c == 0xF0 && byte(1) < 0x90) return 0;
    if (c == 0xF4 && byte(1) >= 0x90) return 0;
    return 4;
  }
  return 0;
}

}  // namespace

size_t sequence_length(std::string_view s, size_t at) {
  const size_t n = valid_length(s, at);
  return n ? n : 1;
}

char32_t decode(std::string_view s, size_t at, size_t* length) {
  const auto c = static_cast<unsigned char>(s[at]);
  const size_t n = sequence_length(s, at);
  *length = n;
  if (n == 1) return c;
  char32_t cp = c & (0x7F >> n);
  for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<unsigned char>(s[at + i]) & 0x3F);
  return cp;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t first_invalid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = valid_length(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

std::string lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = valid_length(s, i);
    if (n) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    // One U+FFFD per maximal invalid prefix, as Rust: a lead byte and the continuation bytes that
    // could still have completed it.
    out += "\xEF\xBF\xBD";
    const auto c = static_cast<unsigned char>(s[i]);
    size_t skip = 1;
    const size_t want = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 1;
    while (skip < want && i + skip < s.size() && continuation(static_cast<unsigned char>(s[i + skip]))) {
      const auto second = static_cast<unsigned char>(s[i + 1]);
      if (skip == 1 && ((c == 0xE0 && second < 0xA0) || (c == 0xED && second >= 0xA0) ||
                        (c == 0xF0 && second < 0x90) || (c == 0xF4 && second >= 0x90)))
        break;
      ++skip;
    }
    i += skip;
  }
  return out;
}

}  // namespace kvsketch::model::utf8
