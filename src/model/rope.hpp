// Rotary position embeddings as Hugging Face's Llama applies them ("rotate half": channel i pairs
// with channel i + head_dim/2), with the frequencies of the config's scaling rule.
#pragma once
#include <cstddef>
#include <vector>

#include "kvsketch/model/model_config.hpp"

namespace kvsketch::model {

class Rope {
 public:
  Rope(const RopeConfig& config, size_t head_dim);
  // Rotates `heads` vectors of head_dim channels, all at `position`, in place.
  void apply(float* vectors, size_t heads, size_t position) const;
  const std::vector<float>& inverse_frequencies() const { return inverse_frequencies_; }

 private:
  size_t head_dim_;
  std::vector<float> inverse_frequencies_;
};

}  // namespace kvsketch::model
