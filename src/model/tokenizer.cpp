#include "kvsketch/model/tokenizer.hpp"

#include <nlohmann/json.hpp>
#include <utf8proc.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/require.hpp"
#include "model/bpe_model.hpp"
#include "model/tokenizer_stages.hpp"
#include "model/utf8.hpp"

namespace kvsketch::model {
namespace {

using nlohmann::json;

struct AddedToken {
  std::string content;
  std::string pattern;  // what is matched: the content, normalized where the token is
  int32_t id;
  bool special, normalized, single_word, lstrip, rstrip;
};

// Unicode's White_Space, as Rust's char::is_whitespace that the library strips with.
bool is_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// The length of the character that ends text[..end), or 0 at the start.
size_t previous_character(const std::string& text, size_t end) {
  size_t start = end;
  while (start > 0 && start + 4 > end) {
    --start;
    if ((static_cast<unsigned char>(text[start]) & 0xC0) != 0x80) break;
  }
  size_t n = 0;
  if (start == end) return 0;
  utf8::decode(text, start, &n);
  return start + n == end ? n : 1;
}

// The length of the whitespace character that ends text[..end), or 0.
size_t whitespace_before(const std::string& text, size_t end) {
  const size_t n = previous_character(text, end);
  size_t length = 0;
  return n && is_whitespace(utf8::decode(text, end - n, &length)) ? n : 0;
}

size_t whitespace_at(const std::string& text, size_t at) {
  size_t n = 0;
  return at < text.size() && is_whitespace(utf8::decode(text, at, &n)) ? n : 0;
}
// Unicode's \w (letters, marks, decimal and letter numbers, connector punctuation), as the library's
// single_word test: "②" (No) is not a word character.
bool is_word_character(char32_t c) {
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return c == 0x200C || c == 0x200D;  // the joiners
  }
}

// A segment of the input: text still to tokenize, or an added token already matched.
struct Segment {
  std::string text;
  int32_t added = -1;
  bool at_start = false;  // begins at offset 0 of the input
};

// Splits `text` at the leftmost-longest occurrences of `tokens`, as the library's added vocabulary.
std::vector<Segment> split_added(const std::string& text, const std::vector<const AddedToken*>& tokens, bool at_start) {
  std::vector<Segment> out;
  size_t at = 0, plain_from = 0;
  auto flush = [&](size_t to) {
    if (to > plain_from) out.push_back({text.substr(plain_from, to - plain_from), -1, at_start && plain_from == 0});
  };
  while (at < text.size()) {
    const AddedToken* best = nullptr;
    for (const AddedToken* t : tokens) {
      if (text.compare(at, t->pattern.size(), t->pattern) != 0) continue;
      if (t->single_word) {
        const size_t end = at + t->pattern.size();
        size_t n = 0;
        const size_t before = previous_character(text, at);
        if ((before && is_word_character(utf8::decode(text, at - before, &n))) ||
            (end < text.size() && is_word_character(utf8::decode(text, end, &n))))
          continue;
      }
      if (!best || t->pattern.size() > best->pattern.size()) best = t;
    }
    if (!best) {
      at += utf8::sequence_length(text, at);
      continue;
    }
    size_t from = at, to = at + best->pattern.size();
    if (best->lstrip)
      for (size_t n; from > plain_from && (n = whitespace_before(text, from)) > 0;) from -= n;
    if (best->rstrip)
      for (size_t n; (n = whitespace_at(text, to)) > 0;) to += n;
    flush(from);
    out.push_back({"", best->id, false});
    at = plain_from = to;
  }
  flush(text.size());
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  require(static_cast<bool>(in), "cannot open tokenizer '{}'", path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

struct Tokenizer::State {
  std::string source;
  std::vector<AddedToken> added;
  std::vector<const AddedToken*> raw_added, normalized_added;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  std::unique_ptr<BpeModel> model;
  TokenDecoder decoder;
  std::vector<int32_t> prefix, suffix;  // the post-processor's special tokens around a sequence
  std::vector<std::string> tokens;      // by id, added tokens included
  std::vector<bool> special;            // by id

  void read_post_processor(const json& spec) {
    if (spec.is_null()) return;
    const std::string type = spec.value("type", std::string());
    if (type == "Sequence") {
      for (const json& part : spec.at("processors")) read_post_processor(part);
      return;
    }
    if (type == "ByteLevel") return;  // it only trims offsets
    require(type == "TemplateProcessing", "{}: post_processor type '{}' is not supported (TemplateProcessing, "
            "ByteLevel, Sequence)", source, type);
    bool before = true;
    for (const json& item : spec.at("single")) {
      if (item.contains("Sequence")) {
        require(before, "{}: a TemplateProcessing 'single' template with two sequences", source);
        before = false;
        continue;
      }
      const std::string name = item.at("SpecialToken").at("id").get<std::string>();
      require(spec.at("special_tokens").contains(name), "{}: template token '{}' is not in special_tokens", source, name);
      for (const json& id : spec.at("special_tokens").at(name).at("ids"))
        (before ? prefix : suffix).push_back(id.get<int32_t>());
    }
  }
};

Tokenizer::Tokenizer(std::unique_ptr<State> state) : state_(std::move(state)) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Tokenizer Tokenizer::load(const std::string& path) {
  const std::string file =
      std::filesystem::is_directory(path) ? (std::filesystem::path(path) / "tokenizer.json").string() : path;
  return parse(read_text(file), file);
}

Tokenizer Tokenizer::parse(std::string_view json_text, const std::string& source) {
  auto s = std::make_unique<State>();
  s->source = source;
  json spec;
  try {
    spec = json::parse(json_text);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON: {}", source, e.what()));
  }
  try {
    require(spec.is_object() && spec.contains("model"), "{}: not a tokenizer.json (no 'model')", source);
    s->model = std::make_unique<BpeModel>(spec.at("model"), source);
    s->normalizer = make_normalizer(spec.value("normalizer", json()), source);
    s->pre_tokenizer = make_pre_tokenizer(spec.value("pre_tokenizer", json()), source);
    s->decoder = make_decoder(spec.value("decoder", json()), source);
    s->tokens = s->model->tokens();
    for (const json& t : spec.value("added_tokens", json::array())) {
      AddedToken a{t.at("content").get<std::string>(), "", t.at("id").get<int32_t>(), t.value("special", false),
                   t.value("normalized", false), t.value("single_word", false), t.value("lstrip", false),
                   t.value("rstrip", false)};
      require(a.id >= 0 && a.id < (1 << 24) && !a.content.empty(), "{}: added token {} has an invalid id or content",
              source, t.dump());
      s->added.push_back(a);
    }
    for (AddedToken& a : s->added) {
      if (s->tokens.size() <= static_cast<size_t>(a.id)) s->tokens.resize(a.id + 1);
      s->tokens[a.id] = a.content;
      const bool normalized = a.normalized && !a.special;
      // The library matches a normalized token in its normalized form ("[X]" as "▁[X]" in Llama 2).
      a.pattern = normalized && s->normalizer ? s->normalizer(a.content) : a.content;
      (normalized ? s->normalized_added : s->raw_added).push_back(&a);
    }
    s->special.assign(s->tokens.size(), false);
    for (const AddedToken& a : s->added) s->special[a.id] = a.special;
    s->read_post_processor(spec.value("post_processor", json()));
    for (const auto* list : {&s->prefix, &s->suffix})
      for (int32_t id : *list)
        require(id >= 0 && static_cast<size_t>(id) < s->tokens.size(), "{}: post-processor token id {} is outside the "
                "vocabulary", source, id);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: malformed tokenizer: {}", source, e.what()));
  }
  return Tokenizer(std::move(s));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const State& s = *state_;
  const size_t bad = utf8::first_invalid(text);
  require(bad == std::string_view::npos, "encode: the text is not valid UTF-8 at byte {}", bad);
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = s.prefix;
  for (Segment& raw : split_added(std::string(text), s.raw_added, true)) {
    if (raw.added >= 0) {
      ids.push_back(raw.added);
      continue;
    }
    std::string normalized = s.normalizer ? s.normalizer(std::move(raw.text)) : std::move(raw.text);
    for (Segment& segment : split_added(normalized, s.normalized_added, raw.at_start)) {
      if (segment.added >= 0) {
        ids.push_back(segment.added);
        continue;
      }
      std::vector<std::string> pieces{std::move(segment.text)};
      if (s.pre_tokenizer) pieces = s.pre_tokenizer(std::move(pieces), segment.at_start);
      for (const std::string& piece : pieces) s.model->encode(piece, ids);
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), s.suffix.begin(), s.suffix.end());
  return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  const State& s = *state_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    require(ids[i] >= 0 && static_cast<size_t>(ids[i]) < s.tokens.size() && !s.tokens[ids[i]].empty(),
            "decode: id {} (at {}) is not in the vocabulary of {}", ids[i], i, s.tokens.size());
    if (skip_special_tokens && s.special[ids[i]]) continue;
    tokens.push_back(s.tokens[ids[i]]);
  }
  std::string text;
  if (!s.decoder) {  // the library joins tokens with spaces when there is no decoder
    for (size_t i = 0; i < tokens.size(); ++i) text += (i ? " " : "") + tokens[i];
    return text;
  }
  for (const std::string& part : s.decoder(std::move(tokens))) text += part;
  return text;
}

size_t Tokenizer::vocab_size() const { return state_->tokens.size(); }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  for (const AddedToken& a : state_->added)
    if (a.content == token) return a.id;
  return state_->model->id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  require(id >= 0 && static_cast<size_t>(id) < state_->tokens.size(), "id_to_token: id {} is outside the vocabulary "
          "of {}", id, state_->tokens.size());
  return state_->tokens[id];
}

}  // namespace kvsketch::model
