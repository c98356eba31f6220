#include "model/bpe_model.hpp"

#include <queue>

#include "core/require.hpp"
#include "model/utf8.hpp"

namespace kvsketch::model {
namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

bool is_set(const nlohmann::json& spec, const char* key) { return spec.contains(key) && !spec.at(key).is_null(); }

}  // namespace

BpeModel::BpeModel(const nlohmann::json& spec, const std::string& where) {
  require(spec.is_object() && spec.value("type", std::string("BPE")) == "BPE",
          "{}: model type {} is not supported; expected BPE", where,
          spec.is_object() && spec.contains("type") ? spec.at("type").dump() : "(none)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    require(!is_set(spec, key) || spec.at(key).get<std::string>().empty(), "{}: BPE field '{}' is not supported", where,
            key);
  require(!is_set(spec, "dropout") || spec.at("dropout").get<double>() == 0.0,
          "{}: BPE dropout is a training option; expected null", where);
  require(spec.contains("vocab") && spec.at("vocab").is_object(), "{}: BPE model has no vocab object", where);
  for (const auto& [token, id] : spec.at("vocab").items()) {
    require(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < (1 << 24),
            "{}: vocab entry '{}' has id {}; expected 0 to 2^24", where, token, id.dump());
    const auto i = id.get<int32_t>();
    vocab_[token] = i;
    if (tokens_.size() <= static_cast<size_t>(i)) tokens_.resize(i + 1);
    tokens_[i] = token;
  }
  byte_fallback_ = spec.value("byte_fallback", false);
  fuse_unknown_ = spec.value("fuse_unk", false);
  ignore_merges_ = spec.value("ignore_merges", false);
  if (is_set(spec, "unk_token")) {
    const std::string unk = spec.at("unk_token").get<std::string>();
    require(vocab_.count(unk), "{}: unk_token '{}' is not in the vocabulary", where, unk);
    unknown_ = vocab_.at(unk);
  }
  has_byte_ids_ = true;
  for (int b = 0; b < 256; ++b) {
    const auto it = vocab_.find(fmt::format("<0x{:02X}>", b));
    has_byte_ids_ = has_byte_ids_ && it != vocab_.end();
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
  }
  require(spec.contains("merges") && spec.at("merges").is_array(), "{}: BPE model has no merges list", where);
  uint32_t rank = 0;
  for (const nlohmann::json& merge : spec.at("merges")) {
    std::string left, right;
    if (merge.is_string()) {  // "left right", the older format
      const std::string text = merge.get<std::string>();
      const size_t space = text.find(' ');
      require(space != std::string::npos && text.find(' ', space + 1) == std::string::npos,
              "{}: merge '{}' is not two tokens separated by one space", where, text);
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else {
      require(merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string(),
              "{}: merge {} is not a pair of tokens", where, merge.dump());
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    }
    const auto l = vocab_.find(left), r = vocab_.find(right), m = vocab_.find(left + right);
    require(l != vocab_.end() && r != vocab_.end(), "{}: merge '{} {}' names a token missing from the vocabulary",
            where, left, right);
    require(m != vocab_.end(), "{}: merge '{} {}' gives '{}', which is not in the vocabulary", where, left, right,
            left + right);
    merges_.try_emplace(pair_key(l->second, r->second), Merge{rank++, m->second});
  }
}

std::optional<int32_t> BpeModel::id(std::string_view token) const {
  const auto it = vocab_.find(std::string(token));
  return it == vocab_.end() ? std::nullopt : std::optional<int32_t>(it->second);
}

void BpeModel::encode(std::string_view piece, std::vector<int32_t>& ids) const {
  if (piece.empty()) return;
  if (ignore_merges_)
    if (const auto whole = vocab_.find(std::string(piece)); whole != vocab_.end()) {
      ids.push_back(whole->second);
      return;
    }
  struct Symbol {
    int32_t id;
    int prev, next;
    bool alive;
  };
  std::vector<Symbol> symbols;
  bool previous_unknown = false;
  for (size_t i = 0, n = 0; i < piece.size(); i += n) {
    utf8::decode(piece, i, &n);
    const auto it = vocab_.find(std::string(piece.substr(i, n)));
    if (it != vocab_.end()) {
      symbols.push_back({it->second, 0, 0, true});
      previous_unknown = false;
      continue;
    }
    if (byte_fallback_ && has_byte_ids_) {
      for (size_t b = 0; b < n; ++b) symbols.push_back({byte_ids_[static_cast<unsigned char>(piece[i + b])], 0, 0, true});
      previous_unknown = false;
      continue;
    }
    if (!unknown_) continue;  // as the library: a character with no token and no unk is dropped
    if (!(fuse_unknown_ && previous_unknown)) symbols.push_back({*unknown_, 0, 0, true});
    previous_unknown = true;
  }
  const int count = static_cast<int>(symbols.size());
  for (int i = 0; i < count; ++i) {
    symbols[i].prev = i - 1;
    symbols[i].next = i + 1 < count ? i + 1 : -1;
  }
  struct Candidate {
    uint32_t rank;
    int position;
    int32_t merged;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : position > o.position; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int at) {
    if (at < 0 || symbols[at].next < 0) return;
    const auto m = merges_.find(pair_key(symbols[at].id, symbols[symbols[at].next].id));
    if (m != merges_.end()) queue.push({m->second.rank, at, m->second.merged});
  };
  for (int i = 0; i + 1 < count; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.position];
    if (!left.alive || left.next < 0) continue;
    const auto m = merges_.find(pair_key(left.id, symbols[left.next].id));
    if (m == merges_.end() || m->second.merged != top.merged) continue;  // stale: a neighbour changed
    Symbol& right = symbols[left.next];
    left.id = top.merged;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.position;
    consider(left.prev);
    consider(top.position);
  }
  for (const Symbol& s : symbols)
    if (s.alive) ids.push_back(s.id);
}

}  // namespace kvsketch::model
