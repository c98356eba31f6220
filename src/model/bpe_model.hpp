// The BPE model of a tokenizer.json: a vocabulary and ranked merges. A piece is split into its
// characters (unknown ones into byte tokens <0xXX> with byte fallback, else the unknown token),
// then the adjacent pair of lowest merge rank is merged, leftmost first, until none is left:
// the `tokenizers` library's algorithm.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvsketch::model {

class BpeModel {
 public:
  BpeModel(const nlohmann::json& spec, const std::string& where);
  void encode(std::string_view piece, std::vector<int32_t>& ids) const;
  std::optional<int32_t> id(std::string_view token) const;
  const std::vector<std::string>& tokens() const { return tokens_; }  // by id ("" for gaps)

 private:
  struct Merge {
    uint32_t rank;
    int32_t merged;
  };
  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> tokens_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::optional<int32_t> unknown_;
  bool byte_fallback_ = false, fuse_unknown_ = false, ignore_merges_ = false;
  int32_t byte_ids_[256];
  bool has_byte_ids_ = false;
};

}  // namespace kvsketch::model
