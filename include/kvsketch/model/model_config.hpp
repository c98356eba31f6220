// ModelConfig: the shape and arithmetic of a Llama-family decoder, read from a Hugging Face
// `config.json`. Families: LlamaForCausalLM (Llama 2 and 3.x, TinyLlama, SmolLM), MistralForCausalLM
// (no sliding window within the context used), Qwen2ForCausalLM (q/k/v bias) and Qwen3ForCausalLM
// (an RMSNorm over each query and key head before RoPE). Both spellings of RoPE are read: the
// classic `rope_theta` + `rope_scaling`, and the newer `rope_parameters`.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#pragma GCC visibility push(default)
namespace kvsketch::model {

enum class Architecture { kLlama, kMistral, kQwen2, kQwen3 };

// How RoPE frequencies are scaled: none ("default"), linear (divided by factor), or Llama 3's
// frequency-dependent rule (low frequencies divided by factor, high ones kept, a smooth blend).
enum class RopeScaling { kNone, kLinear, kLlama3 };

struct RopeConfig {
  double theta = 10000.0;
  RopeScaling scaling = RopeScaling::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  size_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  Architecture architecture = Architecture::kLlama;
  std::string architecture_name;  // as config.json spells it
  size_t vocab_size = 0;
  size_t hidden_size = 0;
  size_t intermediate_size = 0;
  size_t layers = 0;
  size_t q_heads = 0;
  size_t kv_heads = 0;
  size_t head_dim = 0;
  double rms_norm_eps = 1e-6;
  RopeConfig rope;
  size_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;    // Qwen2, or attention_bias (Llama, Qwen3)
  bool output_bias = false; // attention_bias also biases o_proj (not Qwen2's)
  bool qk_norm = false;     // Qwen3: q_norm and k_norm, RMSNorm over each head's head_dim channels
  bool mlp_bias = false;
  std::optional<size_t> sliding_window;  // positions beyond it are refused
  std::optional<int64_t> bos_token_id, eos_token_id;

  // Parses config.json text; `source` names it in errors. An unsupported architecture, activation
  // or RoPE type, a missing field, or an inconsistent shape (head_dim, GQA, sizes of 0) is an Error
  // naming the field.
  static ModelConfig parse(const std::string& json_text, const std::string& source);
  static ModelConfig load(const std::string& model_dir);
};

}  // namespace kvsketch::model
#pragma GCC visibility pop
