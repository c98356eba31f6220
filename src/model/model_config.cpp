#include "kvsketch/model/model_config.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/require.hpp"

namespace kvsketch::model {
namespace {

using nlohmann::json;

struct Reader {
  const json& object;
  const std::string& source;

  bool has(const char* key) const { return object.contains(key) && !object.at(key).is_null(); }

  size_t positive(const char* key) const {
    require(has(key), "{}: missing field '{}'", source, key);
    const json& v = object.at(key);
    require(v.is_number_integer() && v.get<int64_t>() > 0, "{}: field '{}' is {}; expected a positive integer", source,
            key, v.dump());
    return v.get<size_t>();
  }
  size_t positive_or(const char* key, size_t fallback) const { return has(key) ? positive(key) : fallback; }

  double number_or(const json& where, const char* key, double fallback, const char* what) const {
    if (!where.contains(key) || where.at(key).is_null()) return fallback;
    const json& v = where.at(key);
    require(v.is_number(), "{}: field '{}{}' is {}; expected a number", source, what, key, v.dump());
    return v.get<double>();
  }
  bool flag_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    require(object.at(key).is_boolean(), "{}: field '{}' is {}; expected true or false", source, key,
            object.at(key).dump());
    return object.at(key).get<bool>();
  }
  std::optional<int64_t> token_id(const char* key) const {
    if (!has(key)) return std::nullopt;
    const json& v = object.at(key);
    if (v.is_array()) {  // Llama 3.1 lists several eos ids; the first is the one generation emits
      if (v.empty()) return std::nullopt;
      require(v.front().is_number_integer(), "{}: field '{}' holds {}; expected token ids", source, key, v.dump());
      return v.front().get<int64_t>();
    }
    require(v.is_number_integer(), "{}: field '{}' is {}; expected a token id", source, key, v.dump());
    return v.get<int64_t>();
  }
};

Architecture architecture_of(const json& config, const std::string& source, std::string& name) {
  if (config.contains("architectures")) {
    const json& list = config.at("architectures");
    require(list.is_array() && list.size() == 1 && list.front().is_string(),
            "{}: field 'architectures' is {}; expected one architecture name", source, list.dump());
    name = list.front().get<std::string>();
  } else {
    require(config.contains("model_type") && config.at("model_type").is_string(),
            "{}: missing fields 'architectures' and 'model_type'", source);
    name = config.at("model_type").get<std::string>();
  }
  if (name == "LlamaForCausalLM" || name == "llama") return Architecture::kLlama;
  if (name == "MistralForCausalLM" || name == "mistral") return Architecture::kMistral;
  if (name == "Qwen2ForCausalLM" || name == "qwen2") return Architecture::kQwen2;
  if (name == "Qwen3ForCausalLM" || name == "qwen3") return Architecture::kQwen3;
  throw Error(fmt::format("{}: architecture '{}' is not supported; expected LlamaForCausalLM, MistralForCausalLM, "
                          "Qwen2ForCausalLM or Qwen3ForCausalLM",
                          source, name));
}

// rope_scaling (classic) or rope_parameters (newer transformers; it also carries rope_theta).
void read_rope(const Reader& r, const json& config, RopeConfig& rope, size_t max_positions) {
  const char* key = config.contains("rope_parameters") && !config.at("rope_parameters").is_null() ? "rope_parameters"
                                                                                                   : "rope_scaling";
  rope.theta = r.number_or(config, "rope_theta", rope.theta, "");
  if (!config.contains(key) || config.at(key).is_null()) return;
  const json& p = config.at(key);
  const std::string prefix = std::string(key) + ".";
  require(p.is_object(), "{}: field '{}' is {}; expected an object", r.source, key, p.dump());
  rope.theta = r.number_or(p, "rope_theta", rope.theta, prefix.c_str());
  // "rope_type", or "type" in older configs; transformers writes both, and they must agree.
  std::string type;
  for (const char* name : {"rope_type", "type"}) {
    if (!p.contains(name)) continue;
    require(p.at(name).is_string(), "{}: field '{}{}' is {}; expected a string", r.source, prefix, name,
            p.at(name).dump());
    const std::string given = p.at(name).get<std::string>();
    require(type.empty() || type == given, "{}: '{}rope_type' is '{}' but '{}type' is '{}'", r.source, prefix, type,
            prefix, given);
    type = given;
  }
  if (type.empty()) type = "default";
  if (type == "default") return;
  rope.factor = r.number_or(p, "factor", 0.0, prefix.c_str());
  require(rope.factor >= 1.0, "{}: field '{}factor' is {}; expected a number >= 1", r.source, prefix, rope.factor);
  if (type == "linear") {
    rope.scaling = RopeScaling::kLinear;
    return;
  }
  require(type == "llama3", "{}: RoPE type '{}' is not supported; expected default, linear or llama3", r.source, type);
  rope.scaling = RopeScaling::kLlama3;
  rope.low_freq_factor = r.number_or(p, "low_freq_factor", 1.0, prefix.c_str());
  rope.high_freq_factor = r.number_or(p, "high_freq_factor", 4.0, prefix.c_str());
  rope.original_max_position_embeddings =
      static_cast<size_t>(r.number_or(p, "original_max_position_embeddings", double(max_positions), prefix.c_str()));
  require(rope.high_freq_factor > rope.low_freq_factor && rope.low_freq_factor > 0,
          "{}: llama3 RoPE needs 0 < low_freq_factor < high_freq_factor (got {} and {})", r.source,
          rope.low_freq_factor, rope.high_freq_factor);
  require(rope.original_max_position_embeddings > 0, "{}: '{}original_max_position_embeddings' must be positive",
          r.source, prefix);
}

// Newer configs list each layer's attention in `layer_types`; the runtime attends every layer
// fully, so a sliding layer limits the positions it accepts as a sliding config does.
bool has_sliding_layer(const Reader& r, size_t layers) {
  if (!r.has("layer_types")) return false;
  const json& types = r.object.at("layer_types");
  require(types.is_array() && types.size() == layers,
          "{}: field 'layer_types' is {}; expected a list of {} layer types, one per layer", r.source, types.dump(),
          layers);
  bool sliding = false;
  for (const json& t : types) {
    require(t.is_string() && (t == "full_attention" || t == "sliding_attention"),
            "{}: layer type {} is not supported; expected \"full_attention\" or \"sliding_attention\"", r.source,
            t.dump());
    sliding = sliding || t == "sliding_attention";
  }
  return sliding;
}

}  // namespace

ModelConfig ModelConfig::parse(const std::string& json_text, const std::string& source) {
  json config;
  try {
    config = json::parse(json_text);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON: {}", source, e.what()));
  }
  require(config.is_object(), "{}: expected a JSON object", source);
  const Reader r{config, source};
  ModelConfig c;
  c.architecture = architecture_of(config, source, c.architecture_name);
  c.vocab_size = r.positive("vocab_size");
  c.hidden_size = r.positive("hidden_size");
  c.intermediate_size = r.positive("intermediate_size");
  c.layers = r.positive("num_hidden_layers");
  c.q_heads = r.positive("num_attention_heads");
  c.kv_heads = r.positive_or("num_key_value_heads", c.q_heads);
  require(c.q_heads % c.kv_heads == 0, "{}: num_attention_heads {} is not a multiple of num_key_value_heads {}",
          source, c.q_heads, c.kv_heads);
  if (r.has("head_dim")) {
    c.head_dim = r.positive("head_dim");
  } else {
    require(c.hidden_size % c.q_heads == 0, "{}: hidden_size {} is not a multiple of num_attention_heads {} "
            "(and no head_dim is given)", source, c.hidden_size, c.q_heads);
    c.head_dim = c.hidden_size / c.q_heads;
  }
  require(c.head_dim % 2 == 0, "{}: head_dim {} is odd; RoPE rotates pairs of channels", source, c.head_dim);
  c.rms_norm_eps = r.number_or(config, "rms_norm_eps", c.rms_norm_eps, "");
  require(c.rms_norm_eps > 0 && c.rms_norm_eps < 1, "{}: rms_norm_eps {} is not in (0, 1)", source, c.rms_norm_eps);
  c.max_position_embeddings = r.positive_or("max_position_embeddings", 2048);
  read_rope(r, config, c.rope, c.max_position_embeddings);
  require(c.rope.theta > 1, "{}: rope_theta {} must be above 1", source, c.rope.theta);
  c.tie_word_embeddings = r.flag_or("tie_word_embeddings", false);
  if (r.has("hidden_act")) {
    const json& act = config.at("hidden_act");
    require(act.is_string() && (act.get<std::string>() == "silu" || act.get<std::string>() == "swish"),
            "{}: hidden_act {} is not supported; expected \"silu\"", source, act.dump());
  }
  const bool attention_bias = r.flag_or("attention_bias", false);
  c.qkv_bias = c.architecture == Architecture::kQwen2 || attention_bias;
  c.output_bias = c.architecture != Architecture::kQwen2 && attention_bias;
  c.mlp_bias = r.flag_or("mlp_bias", false);
  c.qk_norm = c.architecture == Architecture::kQwen3;
  const bool qwen = c.architecture == Architecture::kQwen2 || c.architecture == Architecture::kQwen3;
  const bool sliding = c.architecture == Architecture::kMistral || (qwen && r.flag_or("use_sliding_window", false)) ||
                       has_sliding_layer(r, c.layers);
  if (sliding && r.has("sliding_window")) c.sliding_window = r.positive("sliding_window");
  c.bos_token_id = r.token_id("bos_token_id");
  c.eos_token_id = r.token_id("eos_token_id");
  for (const auto& [name, id] : {std::pair{"bos_token_id", c.bos_token_id}, std::pair{"eos_token_id", c.eos_token_id}})
    require(!id || (*id >= 0 && static_cast<size_t>(*id) < c.vocab_size), "{}: {} {} is outside the vocabulary of {}",
            source, name, id.value_or(0), c.vocab_size);
  // Sizes whose products must not overflow the runtime's indexing.
  require(c.hidden_size <= (1u << 20) && c.intermediate_size <= (1u << 22) && c.vocab_size <= (1u << 24) &&
              c.layers <= 4096 && c.q_heads * c.head_dim <= (1u << 20),
          "{}: shape beyond what the runtime supports (hidden {}, intermediate {}, vocab {}, layers {})", source,
          c.hidden_size, c.intermediate_size, c.vocab_size, c.layers);
  return c;
}

ModelConfig ModelConfig::load(const std::string& model_dir) {
  const std::string path = (std::filesystem::path(model_dir) / "config.json").string();
  std::ifstream in(path);
  require(static_cast<bool>(in), "model '{}': cannot open {}", model_dir, path);
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

}  // namespace kvsketch::model
