#include "kvsketch/kv_policy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <set>
#include <charconv>
#include <string_view>
#include <vector>

#include "codec/channel_split.hpp"
#include "codec/spec_parser.hpp"
#include "kvsketch/codec.hpp"
#include "core/require.hpp"

namespace kvsketch {
namespace {

// layout=, which older specs and files carry: read and ignored (the row packing is the cache's own).
constexpr std::array<std::string_view, 3> kLayoutNames = {"auto", "plain", "quads"};
constexpr size_t kMaxSinks = size_t{1} << 20, kMaxWindow = size_t{1} << 24, kMaxBlock = size_t{1} << 20;
constexpr size_t kMaxLayer = size_t{1} << 16;
constexpr size_t kMaxPage = size_t{1} << 20, kMaxRollback = size_t{1} << 20;

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

size_t parse_count(const std::string& spec, const std::string& key, const std::string& text, size_t max) {
  size_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  require(error == std::errc() && end == text.data() + text.size() && !text.empty() && value <= max,
          "policy '{}': {} must be an integer in 0..{}, got '{}'", spec, key, max, text);
  return value;
}

// Checks a codec spec by building it (the factory's error lists the valid codecs).
void checked_codec(const std::string& policy, const std::string& codec) {
  require(!codec.empty(), "policy '{}': empty codec field", policy);
  try {
    // Syntax and ranges; the cache builds the real ones per head_dim and checks a split's total there.
    const size_t fixed = split_fixed_dim(unwrapped_spec(codec));
    make_codec(codec, fixed != 0 ? fixed : 256);
  } catch (const Error& e) {
    throw Error(fmt::format("policy '{}': {}", policy, e.what()));
  }
}

// "kivi:..." names KIVI's pair: per-channel keys (kivi_k), per-token values (kivi_v).
std::string for_role(const std::string& codec, bool key) {
  if (codec.rfind("kivi:", 0) != 0 && codec != "kivi") return codec;
  return (key ? "kivi_k" : "kivi_v") + codec.substr(4);
}

KVCodecPair role_pair(const std::string& key, const std::string& value) {
  return {for_role(key, true), for_role(value, false)};
}

KVCodecPair parse_pair(const std::string& policy, const std::string& text) {
  const auto parts = split(text, '/');
  require(parts.size() <= 2, "policy '{}': expected KEYCODEC/VALUECODEC, got '{}'", policy, text);
  return role_pair(parts[0], parts.back());
}

// Every field in range and every codec spec buildable; `label` names the policy in errors.
void check_policy(const KVPolicy& policy, const std::string& label) {
  require(policy.sinks <= kMaxSinks, "policy '{}': sinks must be in 0..{}, got {}", label, kMaxSinks, policy.sinks);
  require(policy.window <= kMaxWindow, "policy '{}': window must be in 0..{}, got {}", label, kMaxWindow,
          policy.window);
  require(policy.block >= 1 && policy.block <= kMaxBlock, "policy '{}': block must be in 1..{}, got {}", label,
          kMaxBlock, policy.block);
  require(policy.page <= kMaxPage && policy.page % policy.block == 0,
          "policy '{}': page must be a multiple of block ({}) in 0..{} (0: about 1024 tokens), got {}", label,
          policy.block, kMaxPage, policy.page);
  require(policy.rollback <= kMaxRollback, "policy '{}': rollback must be in 0..{}, got {}", label, kMaxRollback,
          policy.rollback);
  std::set<std::string> checked;  // each distinct spec built once, however many layers name it
  const auto check = [&](const std::string& codec) {
    if (checked.insert(codec).second) checked_codec(label, codec);
  };
  check(policy.codecs.key);
  check(policy.codecs.value);
  for (const auto& [layer, pair] : policy.layer_overrides) {
    require(layer <= kMaxLayer, "policy '{}': layer override {} is beyond {}", label, layer, kMaxLayer);
    check(pair.key);
    check(pair.value);
  }
}

}  // namespace

KVPolicy KVPolicy::parse(const std::string& spec) {
  KVPolicy policy;
  std::vector<std::string> codecs;
  std::set<std::string> seen;  // option keys given so far (layers by number: layer01 is layer1)
  for (const std::string& field : split(spec, '|')) {
    const size_t equals = field.find('=');
    const std::string key = field.substr(0, equals);
    // Codec specs have a ':' before any '=', so their "key" is never one of these.
    const bool layer_key = key.size() > 5 && key.rfind("layer", 0) == 0 &&
                           key.find_first_not_of("0123456789", 5) == std::string::npos;
    const bool option =
        equals != std::string::npos &&
        (key == "sinks" || key == "window" || key == "block" || key == "page" || key == "rollback" ||
         key == "layout" || layer_key);
    if (!option) {
      codecs.push_back(field);
      continue;
    }
    const std::string value = field.substr(equals + 1);
    const size_t layer = layer_key ? parse_count(spec, "the layer number in " + key, key.substr(5), kMaxLayer) : 0;
    const std::string name = layer_key ? fmt::format("layer{}", layer) : key;
    require(seen.insert(name).second, "policy '{}': {} is given twice", spec, name);
    if (key == "sinks") {
      policy.sinks = parse_count(spec, key, value, kMaxSinks);
    } else if (key == "window") {
      policy.window = parse_count(spec, key, value, kMaxWindow);
    } else if (key == "block") {
      policy.block = parse_count(spec, key, value, kMaxBlock);
    } else if (key == "page") {
      policy.page = parse_count(spec, key, value, kMaxPage);
    } else if (key == "rollback") {
      policy.rollback = parse_count(spec, key, value, kMaxRollback);
    } else if (key == "layout") {
      const auto it = std::find(kLayoutNames.begin(), kLayoutNames.end(), value);
      require(it != kLayoutNames.end(), "policy '{}': layout must be auto, plain or quads, got '{}'", spec, value);
    } else {
      policy.layer_overrides[layer] = parse_pair(spec, value);
    }
  }
  require(!codecs.empty() && codecs.size() <= 2,
          "policy '{}': expected KEYCODEC[|VALUECODEC] followed by sinks=, window=, block=, page=, rollback=, "
          "layerN= fields "
          "(codecs: {})",
          spec, codec_spec_help());
  policy.codecs = role_pair(codecs[0], codecs.back());
  check_policy(policy, spec);
  return policy;
}

void KVPolicy::validate() const {
  // A policy built field by field never went through parse(): name it by its fields.
  check_policy(*this, fmt::format("{}|{}|sinks={}|window={}|block={}|page={}|rollback={}", codecs.key, codecs.value,
                                  sinks, window, block, page, rollback));
}

std::string KVPolicy::spec() const {
  std::string text = fmt::format("{}|{}|sinks={}|window={}|block={}", codecs.key, codecs.value, sinks, window, block);
  // Spelled out where they differ from the defaults, so that the specs (and the files holding them)
  // of caches that never use them stay as they were.
  if (page != 0) text += fmt::format("|page={}", page);
  if (rollback != 0) text += fmt::format("|rollback={}", rollback);
  for (const auto& [layer, pair] : layer_overrides) text += fmt::format("|layer{}={}/{}", layer, pair.key, pair.value);
  return text;
}

size_t KVPolicy::page_tokens() const {
  if (page != 0) return page;
  // Long enough that a page's kernel call costs little beside its rows, short enough that a
  // sequence's unsealed page and a fork's copy of it stay small.
  return std::max<size_t>(1, (1024 + block / 2) / block) * block;
}

const KVCodecPair& KVPolicy::codecs_for(size_t layer) const {
  const auto it = layer_overrides.find(layer);
  return it == layer_overrides.end() ? codecs : it->second;
}

}  // namespace kvsketch
