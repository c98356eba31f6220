#include "model/tokenizer_stages.hpp"

#include <utf8proc.h>

#include <array>
#include <memory>

#include "core/require.hpp"
#include "model/regex_splitter.hpp"
#include "model/utf8.hpp"

namespace kvsketch::model {
namespace {

using nlohmann::json;

std::string type_of(const json& spec, const std::string& where, const char* stage) {
  require(spec.is_object() && spec.contains("type") && spec.at("type").is_string(),
          "{}: {} {} has no \"type\"", where, stage, spec.dump().substr(0, 200));
  return spec.at("type").get<std::string>();
}

std::string string_field(const json& spec, const char* key, const std::string& where) {
  require(spec.contains(key) && spec.at(key).is_string(), "{}: {} needs a string field '{}'", where,
          spec.dump().substr(0, 200), key);
  return spec.at(key).get<std::string>();
}

template <typename T>
T field_or(const json& spec, const char* key, T fallback) {
  return spec.contains(key) && !spec.at(key).is_null() ? spec.at(key).get<T>() : fallback;
}

// Splits `text` into spans [from, to) flagged as matches of a pattern, covering all of it.
struct Span {
  size_t from, to;
  bool match;
};

// A Split or Replace pattern: {"String": "..."} (literal) or {"Regex": "..."}.
class Pattern {
 public:
  Pattern(const json& spec, const std::string& where) {
    require(spec.is_object() && spec.size() == 1, "{}: pattern {} must be {{\"String\": ...}} or {{\"Regex\": ...}}",
            where, spec.dump());
    if (spec.contains("String")) {
      literal_ = spec.at("String").get<std::string>();
      require(!literal_.empty(), "{}: empty String pattern", where);
    } else {
      require(spec.contains("Regex"), "{}: pattern {} must be String or Regex", where, spec.dump());
      regex_ = std::make_shared<Regex>(spec.at("Regex").get<std::string>(), where);
    }
  }
  std::vector<std::pair<size_t, size_t>> matches(std::string_view text) const {
    if (regex_) return regex_->matches(text);
    std::vector<std::pair<size_t, size_t>> found;
    for (size_t at = text.find(literal_); at != std::string_view::npos; at = text.find(literal_, at + literal_.size()))
      found.emplace_back(at, at + literal_.size());
    return found;
  }
  std::vector<Span> spans(std::string_view text) const {
    std::vector<Span> out;
    size_t at = 0;
    for (auto [from, to] : matches(text)) {
      if (from > at) out.push_back({at, from, false});
      out.push_back({from, to, true});
      at = to;
    }
    if (at < text.size()) out.push_back({at, text.size(), false});
    return out;
  }

 private:
  std::string literal_;
  std::shared_ptr<Regex> regex_;
};

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior behavior_of(const std::string& name, const std::string& where) {
  if (name == "Removed") return Behavior::kRemoved;
  if (name == "Isolated") return Behavior::kIsolated;
  if (name == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::kMergedWithNext;
  if (name == "Contiguous") return Behavior::kContiguous;
  throw Error(fmt::format("{}: split behavior '{}' is not one of Removed, Isolated, MergedWithPrevious, "
                          "MergedWithNext, Contiguous",
                          where, name));
}

// The pieces of `text` cut at the spans as Hugging Face's split behaviors do.
std::vector<std::string> split(std::string_view text, std::vector<Span> spans, Behavior behavior) {
  std::vector<Span> merged;
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kRemoved:
      for (const Span& s : spans)
        if (!s.match) merged.push_back(s);
      break;
    case Behavior::kIsolated:
      merged = spans;
      break;
    case Behavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.match && !previous_match && !merged.empty())
          merged.back().to = s.to;
        else
          merged.push_back(s);
        previous_match = s.match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !previous_match && !merged.empty())
          merged.back().from = it->from;
        else
          merged.push_back(*it);
        previous_match = it->match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    case Behavior::kContiguous:
      for (const Span& s : spans) {
        if (s.match && previous_match && !merged.empty())
          merged.back().to = s.to;
        else
          merged.push_back(s);
        previous_match = s.match;
      }
      break;
  }
  std::vector<std::string> pieces;
  for (const Span& s : merged)
    if (s.to > s.from) pieces.emplace_back(text.substr(s.from, s.to - s.from));
  return pieces;
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  std::string out;
  size_t at = 0;
  for (size_t found = text.find(from); found != std::string::npos; found = text.find(from, at)) {
    out.append(text, at, found - at).append(to);
    at = found + from.size();
  }
  return out.append(text, at, std::string::npos);
}

std::string unicode_map(const std::string& text, int options, const std::string& where) {
  if (text.empty()) return text;
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                              static_cast<utf8proc_ssize_t>(text.size()), &out, static_cast<utf8proc_option_t>(options));
  require(n >= 0, "{}: Unicode normalization failed: {}", where, utf8proc_errmsg(n));
  std::string result(reinterpret_cast<char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

const std::array<char32_t, 256>& byte_map() {
  static const std::array<char32_t, 256> map = [] {
    std::array<char32_t, 256> m{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      m[b] = printable ? static_cast<char32_t>(b) : next++;
    }
    return m;
  }();
  return map;
}

const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace

char32_t byte_to_char(unsigned char byte) { return byte_map()[byte]; }

int char_to_byte(char32_t c) {
  static const std::vector<int> inverse = [] {
    std::vector<int> v(512, -1);
    for (int b = 0; b < 256; ++b) v[byte_map()[b]] = b;
    return v;
  }();
  return c < inverse.size() ? inverse[c] : -1;
}

Normalizer make_normalizer(const json& spec, const std::string& where) {
  if (spec.is_null()) return {};
  const std::string type = type_of(spec, where, "normalizer");
  if (type == "Sequence") {
    std::vector<Normalizer> parts;
    for (const json& part : spec.at("normalizers"))
      if (auto n = make_normalizer(part, where)) parts.push_back(std::move(n));
    return [parts](std::string text) {
      for (const auto& n : parts) text = n(std::move(text));
      return text;
    };
  }
  if (type == "Prepend") {
    const std::string prepend = string_field(spec, "prepend", where);
    return [prepend](std::string text) { return text.empty() ? text : prepend + text; };
  }
  if (type == "Replace") {
    const Pattern pattern(spec.at("pattern"), where);
    const std::string content = string_field(spec, "content", where);
    return [pattern, content](std::string text) {
      std::string out;
      size_t at = 0;
      for (auto [from, to] : pattern.matches(text)) {
        out.append(text, at, from - at).append(content);
        at = to;
      }
      return out.append(text, at, std::string::npos);
    };
  }
  const int stable = UTF8PROC_STABLE;
  for (const auto& [name, options] : {std::pair{"NFC", stable | UTF8PROC_COMPOSE}, std::pair{"NFD", stable | UTF8PROC_DECOMPOSE},
                                      std::pair{"NFKC", stable | UTF8PROC_COMPOSE | UTF8PROC_COMPAT},
                                      std::pair{"NFKD", stable | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT}})
    if (type == name) return [mode = options, where](std::string text) { return unicode_map(text, mode, where); };
  if (type == "Lowercase") {
    return [](std::string text) {
      std::string out;
      for (size_t i = 0, n = 0; i < text.size(); i += n)
        utf8::append(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(utf8::decode(text, i, &n)))));
      return out;
    };
  }
  if (type == "Strip") {
    const bool left = field_or(spec, "strip_left", true), right = field_or(spec, "strip_right", true);
    return [left, right](std::string text) {
      const char* space = " \t\n\r\f\v";
      if (right) text.erase(text.find_last_not_of(space) + 1);
      if (left) text.erase(0, std::min(text.size(), text.find_first_not_of(space)));
      return text;
    };
  }
  throw Error(fmt::format("{}: normalizer type '{}' is not supported (Sequence, Prepend, Replace, NFC, NFKC, NFD, "
                          "NFKD, Lowercase, Strip)",
                          where, type));
}

PreTokenizer make_pre_tokenizer(const json& spec, const std::string& where) {
  if (spec.is_null()) return {};
  const std::string type = type_of(spec, where, "pre_tokenizer");
  if (type == "Sequence") {
    std::vector<PreTokenizer> parts;
    for (const json& part : spec.at("pretokenizers"))
      if (auto p = make_pre_tokenizer(part, where)) parts.push_back(std::move(p));
    return [parts](std::vector<std::string> pieces, bool first) {
      for (const auto& p : parts) pieces = p(std::move(pieces), first);
      return pieces;
    };
  }
  if (type == "Split") {
    const Pattern pattern(spec.at("pattern"), where);
    const Behavior behavior = behavior_of(string_field(spec, "behavior", where), where);
    const bool invert = field_or(spec, "invert", false);
    return [pattern, behavior, invert](std::vector<std::string> pieces, bool) {
      std::vector<std::string> out;
      for (const std::string& piece : pieces) {
        auto spans = pattern.spans(piece);
        if (invert)
          for (Span& s : spans) s.match = !s.match;
        for (std::string& p : split(piece, std::move(spans), behavior)) out.push_back(std::move(p));
      }
      return out;
    };
  }
  if (type == "Digits") {
    const bool individual = field_or(spec, "individual_digits", false);
    return [individual](std::vector<std::string> pieces, bool) {
      std::vector<std::string> out;
      for (const std::string& piece : pieces) {
        // Rust's char::is_numeric, as Hugging Face's Digits: Unicode categories Nd, Nl and No.
        std::vector<Span> spans;
        for (size_t i = 0, n = 0; i < piece.size(); i += n) {
          const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(utf8::decode(piece, i, &n)));
          const bool digit = category == UTF8PROC_CATEGORY_ND || category == UTF8PROC_CATEGORY_NL ||
                             category == UTF8PROC_CATEGORY_NO;
          if (!spans.empty() && !digit && !spans.back().match)
            spans.back().to = i + n;
          else
            spans.push_back({i, i + n, digit});
        }
        for (std::string& p : split(piece, std::move(spans), individual ? Behavior::kIsolated : Behavior::kContiguous))
          out.push_back(std::move(p));
      }
      return out;
    };
  }
  if (type == "ByteLevel") {
    const bool prefix = field_or(spec, "add_prefix_space", true), use_regex = field_or(spec, "use_regex", true);
    std::shared_ptr<Pattern> gpt2;
    if (use_regex) gpt2 = std::make_shared<Pattern>(json{{"Regex", kGpt2Pattern}}, where);
    return [prefix, gpt2](std::vector<std::string> pieces, bool) {
      std::vector<std::string> out;
      for (std::string& piece : pieces) {
        if (prefix && (piece.empty() || piece[0] != ' ')) piece.insert(0, 1, ' ');
        std::vector<std::string> parts =
            gpt2 ? split(piece, gpt2->spans(piece), Behavior::kIsolated) : std::vector<std::string>{piece};
        for (const std::string& part : parts) {
          std::string mapped;
          for (unsigned char b : part) utf8::append(mapped, byte_to_char(b));
          out.push_back(std::move(mapped));
        }
      }
      return out;
    };
  }
  if (type == "Metaspace") {
    const std::string replacement = field_or<std::string>(spec, "replacement", "\u2581");
    std::string scheme = field_or<std::string>(spec, "prepend_scheme", "");
    if (scheme.empty()) scheme = field_or(spec, "add_prefix_space", true) ? "always" : "never";
    require(scheme == "always" || scheme == "first" || scheme == "never",
            "{}: Metaspace prepend_scheme '{}' is not always, first or never", where, scheme);
    const bool split_pieces = field_or(spec, "split", true);
    const Pattern marker(json{{"String", replacement}}, where);
    return [replacement, scheme, split_pieces, marker](std::vector<std::string> pieces, bool first) {
      std::vector<std::string> out;
      for (size_t i = 0; i < pieces.size(); ++i) {
        std::string piece = replace_all(pieces[i], " ", replacement);
        const bool starts = piece.compare(0, replacement.size(), replacement) == 0;
        if (!starts && (scheme == "always" || (scheme == "first" && first && i == 0))) piece.insert(0, replacement);
        if (!split_pieces) {
          out.push_back(std::move(piece));
          continue;
        }
        for (std::string& p : split(piece, marker.spans(piece), Behavior::kMergedWithNext)) out.push_back(std::move(p));
      }
      return out;
    };
  }
  throw Error(fmt::format("{}: pre_tokenizer type '{}' is not supported (Sequence, Split, ByteLevel, Metaspace, "
                          "Digits)",
                          where, type));
}

TokenDecoder make_decoder(const json& spec, const std::string& where) {
  if (spec.is_null()) return {};
  const std::string type = type_of(spec, where, "decoder");
  if (type == "Sequence") {
    std::vector<TokenDecoder> parts;
    for (const json& part : spec.at("decoders"))
      if (auto d = make_decoder(part, where)) parts.push_back(std::move(d));
    return [parts](std::vector<std::string> tokens) {
      for (const auto& d : parts) tokens = d(std::move(tokens));
      return tokens;
    };
  }
  if (type == "ByteLevel") {
    return [](std::vector<std::string> tokens) {
      std::string bytes;
      for (const std::string& token : tokens) {
        std::string mapped;
        bool all = true;
        for (size_t i = 0, n = 0; i < token.size() && all; i += n) {
          const int b = char_to_byte(utf8::decode(token, i, &n));
          all = b >= 0;
          mapped += static_cast<char>(b);
        }
        bytes += all ? mapped : token;
      }
      return std::vector<std::string>{utf8::lossy(bytes)};
    };
  }
  if (type == "Replace") {
    const json& pattern = spec.at("pattern");
    require(pattern.is_object() && pattern.contains("String"), "{}: Replace decoder supports String patterns only", where);
    const std::string from = pattern.at("String").get<std::string>(), to = string_field(spec, "content", where);
    return [from, to](std::vector<std::string> tokens) {
      for (std::string& t : tokens) t = replace_all(t, from, to);
      return tokens;
    };
  }
  if (type == "ByteFallback") {
    return [](std::vector<std::string> tokens) {
      std::vector<std::string> out;
      std::string bytes;
      size_t pending = 0;
      auto flush = [&] {
        if (!pending) return;
        out.push_back(utf8::first_invalid(bytes) == std::string::npos ? bytes : [&] {
          std::string r;
          for (size_t i = 0; i < pending; ++i) r += "\xEF\xBF\xBD";
          return r;
        }());
        bytes.clear();
        pending = 0;
      };
      for (std::string& t : tokens) {
        const bool byte = t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && std::isxdigit(t[3]) &&
                          std::isxdigit(t[4]);
        if (byte) {
          bytes += static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16));
          ++pending;
        } else {
          flush();
          out.push_back(std::move(t));
        }
      }
      flush();
      return out;
    };
  }
  if (type == "Fuse") {
    return [](std::vector<std::string> tokens) {
      std::string all;
      for (const std::string& t : tokens) all += t;
      return std::vector<std::string>{all};
    };
  }
  if (type == "Strip") {
    const std::string content = string_field(spec, "content", where);
    const size_t start = field_or<size_t>(spec, "start", 0), stop = field_or<size_t>(spec, "stop", 0);
    require(content.size() == 1, "{}: Strip decoder content must be one ASCII character", where);
    return [c = content[0], start, stop](std::vector<std::string> tokens) {
      for (std::string& t : tokens) {
        size_t from = 0, to = t.size();
        while (from < start && from < t.size() && t[from] == c) ++from;
        for (size_t n = 0; n < stop && to > from && t[to - 1] == c; ++n) --to;
        t = t.substr(from, to - from);
      }
      return tokens;
    };
  }
  if (type == "Metaspace") {
    const std::string replacement = field_or<std::string>(spec, "replacement", "\u2581");
    std::string scheme = field_or<std::string>(spec, "prepend_scheme", "");
    if (scheme.empty()) scheme = field_or(spec, "add_prefix_space", true) ? "always" : "never";
    return [replacement, scheme](std::vector<std::string> tokens) {
      for (size_t i = 0; i < tokens.size(); ++i)
        tokens[i] = replace_all(tokens[i], replacement, i == 0 && scheme != "never" ? "" : " ");
      return tokens;
    };
  }
  throw Error(fmt::format("{}: decoder type '{}' is not supported (Sequence, ByteLevel, Replace, ByteFallback, Fuse, "
                          "Strip, Metaspace)",
                          where, type));
}

}  // namespace kvsketch::model
