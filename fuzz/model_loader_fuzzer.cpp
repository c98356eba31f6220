// LanguageModel::load on an arbitrary model.safetensors beside a fixed config.json (a one-layer
// Llama with a tied embedding). A model that loads must give finite logits for a token.
#include <filesystem>
#include <fstream>
#include <vector>

#include "fuzz_input.hpp"
#include "kvsketch/model/language_model.hpp"

namespace {

const char* kConfig = R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 16, "hidden_size": 8,
  "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
  "tie_word_embeddings": true, "rms_norm_eps": 1e-6})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kvsketch_fuzz_model_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << kConfig;
  std::ofstream(dir / "model.safetensors", std::ios::binary).write(reinterpret_cast<const char*>(data),
                                                                   static_cast<std::streamsize>(size));
  try {
    const auto model = kvsketch::model::LanguageModel::load(dir.string());
    kvsketch::model::ExactKV kv(1, 1, 4);
    const int32_t token = 3;
    std::vector<float> logits(16);
    model.forward(kv, &token, 1, logits.data(), 1);
    for (float v : logits) kvsketch::fuzz::require_finite(v, "a logit of the loaded model");
  } catch (const kvsketch::Error&) {
  }
  return 0;
}
