// The weights of a Llama-family decoder, read from a Hugging Face model folder (model.safetensors,
// or shards listed by model.safetensors.index.json) into float32, every tensor checked against the
// shape its config implies. Linear weights keep PyTorch's [out][in] row-major layout.
#pragma once
#include <string>
#include <vector>

#include "kvsketch/model/model_config.hpp"

namespace kvsketch::model {

struct LayerWeights {
  std::vector<float> attention_norm, post_attention_norm;
  std::vector<float> q, k, v, o;              // [q_heads*head_dim][hidden], ..., o: [hidden][q_heads*head_dim]
  std::vector<float> q_bias, k_bias, v_bias, o_bias;  // empty unless the config has them
  std::vector<float> q_norm, k_norm;                  // [head_dim] each, Qwen3 only
  std::vector<float> gate, up, down;          // [intermediate][hidden] x2, [hidden][intermediate]
  std::vector<float> gate_bias, up_bias, down_bias;
};

struct ModelWeights {
  std::vector<float> embedding;   // [vocab][hidden]
  std::vector<float> final_norm;  // [hidden]
  std::vector<float> lm_head;     // [vocab][hidden]; empty when tied to the embedding
  std::vector<LayerWeights> layers;

  // Throws Error naming the file and tensor when one is missing, of another shape or dtype, holds
  // NaN or Inf, or a file is truncated or malformed.
  static ModelWeights load(const std::string& model_dir, const ModelConfig& config);
  const std::vector<float>& output_matrix() const { return lm_head.empty() ? embedding : lm_head; }
  size_t bytes() const;
};

}  // namespace kvsketch::model
