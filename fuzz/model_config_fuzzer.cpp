// ModelConfig::parse on arbitrary config.json text: it returns a consistent shape or throws Error.
#include <cstdlib>
#include <string>

#include "fuzz_input.hpp"
#include "kvsketch/model/model_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto c = kvsketch::model::ModelConfig::parse(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    // What the runtime relies on: a GQA group that divides, an even head, a positive shape.
    if (c.kv_heads == 0 || c.q_heads % c.kv_heads != 0 || c.head_dim % 2 != 0 || c.layers == 0 || c.vocab_size == 0)
      std::abort();
  } catch (const kvsketch::Error&) {
  }
  return 0;
}
