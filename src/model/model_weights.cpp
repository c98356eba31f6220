#include "model/model_weights.hpp"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "core/require.hpp"
#include "model/safetensors_file.hpp"

namespace kvsketch::model {
namespace {

namespace fs = std::filesystem;

// Every tensor of the model folder, by name, from one file or the shards its index lists.
class TensorSource {
 public:
  explicit TensorSource(const std::string& dir) {
    const fs::path single = fs::path(dir) / "model.safetensors";
    const fs::path index = fs::path(dir) / "model.safetensors.index.json";
    if (fs::exists(index)) {
      std::ifstream in(index);
      require(static_cast<bool>(in), "cannot open '{}'", index.string());
      nlohmann::json map;
      try {
        map = nlohmann::json::parse(in).at("weight_map");
        require(map.is_object(), "'{}': 'weight_map' is not an object", index.string());
        for (const auto& [name, file] : map.items()) {
          const std::string shard = file.get<std::string>();
          require(shard.find('/') == std::string::npos && shard != ".." && !shard.empty(),
                  "'{}': tensor '{}' names shard '{}' outside the model folder", index.string(), name, shard);
          if (!files_.count(shard)) files_.emplace(shard, std::make_unique<SafetensorsFile>((fs::path(dir) / shard).string()));
          const SafetensorsFile& f = *files_.at(shard);
          require(f.contains(name), "'{}' lists tensor '{}' in '{}', which does not hold it", index.string(), name,
                  f.path());
          owner_.emplace(name, &f);
        }
      } catch (const nlohmann::json::exception& e) {
        throw Error(fmt::format("'{}': malformed index: {}", index.string(), e.what()));
      }
    } else {
      require(fs::exists(single), "model '{}' has neither model.safetensors nor model.safetensors.index.json", dir);
      files_.emplace("model.safetensors", std::make_unique<SafetensorsFile>(single.string()));
      for (const auto& [name, info] : files_.begin()->second->tensors()) owner_.emplace(name, files_.begin()->second.get());
    }
  }

  bool contains(const std::string& name) const { return owner_.count(name) != 0; }

  std::vector<float> fetch(const std::string& name, std::vector<size_t> shape) const {
    const auto it = owner_.find(name);
    require(it != owner_.end(), "model weights have no tensor '{}'", name);
    const SafetensorsFile& file = *it->second;
    const TensorInfo& info = file.info(name);
    require(info.shape == shape, "'{}': tensor '{}' has shape [{}]; the config implies [{}]", file.path(), name,
            fmt::join(info.shape, ", "), fmt::join(shape, ", "));
    std::vector<float> values = file.read_floats(name);
    for (size_t i = 0; i < values.size(); ++i)
      require(std::isfinite(values[i]), "'{}': tensor '{}' holds {} at element {}", file.path(), name, values[i], i);
    return values;
  }

 private:
  std::map<std::string, std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> owner_;
};

}  // namespace

ModelWeights ModelWeights::load(const std::string& model_dir, const ModelConfig& c) {
  const TensorSource source(model_dir);
  ModelWeights w;
  const size_t h = c.hidden_size, qd = c.q_heads * c.head_dim, kvd = c.kv_heads * c.head_dim, f = c.intermediate_size;
  w.embedding = source.fetch("model.embed_tokens.weight", {c.vocab_size, h});
  w.final_norm = source.fetch("model.norm.weight", {h});
  if (!c.tie_word_embeddings)
    w.lm_head = source.fetch("lm_head.weight", {c.vocab_size, h});
  w.layers.resize(c.layers);
  for (size_t i = 0; i < c.layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    LayerWeights& l = w.layers[i];
    l.attention_norm = source.fetch(p + "input_layernorm.weight", {h});
    l.post_attention_norm = source.fetch(p + "post_attention_layernorm.weight", {h});
    l.q = source.fetch(p + "self_attn.q_proj.weight", {qd, h});
    l.k = source.fetch(p + "self_attn.k_proj.weight", {kvd, h});
    l.v = source.fetch(p + "self_attn.v_proj.weight", {kvd, h});
    l.o = source.fetch(p + "self_attn.o_proj.weight", {h, qd});
    if (c.qkv_bias) {
      l.q_bias = source.fetch(p + "self_attn.q_proj.bias", {qd});
      l.k_bias = source.fetch(p + "self_attn.k_proj.bias", {kvd});
      l.v_bias = source.fetch(p + "self_attn.v_proj.bias", {kvd});
    }
    if (c.output_bias) l.o_bias = source.fetch(p + "self_attn.o_proj.bias", {h});
    if (c.qk_norm) {
      l.q_norm = source.fetch(p + "self_attn.q_norm.weight", {c.head_dim});
      l.k_norm = source.fetch(p + "self_attn.k_norm.weight", {c.head_dim});
    }
    l.gate = source.fetch(p + "mlp.gate_proj.weight", {f, h});
    l.up = source.fetch(p + "mlp.up_proj.weight", {f, h});
    l.down = source.fetch(p + "mlp.down_proj.weight", {h, f});
    if (c.mlp_bias) {
      l.gate_bias = source.fetch(p + "mlp.gate_proj.bias", {f});
      l.up_bias = source.fetch(p + "mlp.up_proj.bias", {f});
      l.down_bias = source.fetch(p + "mlp.down_proj.bias", {h});
    }
  }
  return w;
}

size_t ModelWeights::bytes() const {
  size_t floats = embedding.size() + final_norm.size() + lm_head.size();
  for (const LayerWeights& l : layers)
    for (const auto* v : {&l.attention_norm, &l.post_attention_norm, &l.q, &l.k, &l.v, &l.o, &l.q_bias, &l.k_bias,
                          &l.v_bias, &l.o_bias, &l.q_norm, &l.k_norm, &l.gate, &l.up, &l.down, &l.gate_bias,
                          &l.up_bias, &l.down_bias})
      floats += v->size();
  return floats * sizeof(float);
}

}  // namespace kvsketch::model
