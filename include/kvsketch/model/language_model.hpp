// LanguageModel: a Llama-family decoder (model_config.hpp) loaded from a Hugging Face model folder,
// computing in float32, whose every layer's attention goes through a KVStore: a kvsketch cache with
// any policy, or exact float32 attention. A prompt runs in chunks (each chunk's keys and values are
// appended, then its queries attend causally through the compressed past); decoding is a chunk of
// one token.
//
//   auto model = kvsketch::model::LanguageModel::load("models/llama-reference");
//   kvsketch::PagedKVCache cache = model.make_cache(kvsketch::KVPolicy::parse("tq_mse:b=3"));
//   kvsketch::model::CompressedKV kv(cache);
//   std::vector<float> logits(model.config().vocab_size);
//   model.forward(kv, prompt.data(), prompt.size(), logits.data(), 1);   // logits of the last token
//   model.forward_batch(stores, next_tokens, batch, logits);             // a decode step for a batch
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kvsketch/kv_policy.hpp"
#include "kvsketch/model/kv_store.hpp"
#include "kvsketch/model/model_config.hpp"
#include "kvsketch/paged_cache.hpp"

#pragma GCC visibility push(default)
namespace kvsketch::model {

class LanguageModel {
 public:
  // Reads config.json and the safetensors weights (f32, f16 or bf16, one file or shards), checking
  // every tensor's shape against the config. Errors name the file and the problem.
  static LanguageModel load(const std::string& model_dir);
  ~LanguageModel();
  LanguageModel(LanguageModel&&) noexcept;
  LanguageModel& operator=(LanguageModel&&) noexcept;

  const ModelConfig& config() const;
  size_t weight_bytes() const;

  // An empty cache of the model's shape (layers, KV heads, head_dim) under `policy`.
  PagedKVCache make_cache(const KVPolicy& policy, uint64_t seed = 0) const;

  // Runs `count` tokens after the `kv.tokens()` already stored: appends their keys and values to kv
  // and writes the logits of the last `logit_rows` of them (0 to count) to `logits`
  // ([logit_rows][vocab_size]). Token ids outside the vocabulary, and positions beyond a sliding
  // window the runtime does not implement, are refused before anything is appended. Activations
  // that overflow float32 (finite weights too large) are refused naming the layer; the store then
  // holds the chunk in its first layers and is to be discarded.
  void forward(KVStore& kv, const int32_t* tokens, size_t count, float* logits, size_t logit_rows) const;

  // One decode step for a batch of sequences: tokens[b] follows what sequences[b] stores (any
  // lengths), logits [batch][vocab_size]. The projections run as one matrix product over the batch;
  // sequences that are CompressedKV stores of one PagedKVCache attend in one batched decode call
  // (the bits each gets alone from forward's attention), other stores one after another. A sequence
  // given twice is refused. Errors as forward's, checked for every row before anything is appended.
  void forward_batch(KVStore* const* sequences, const int32_t* tokens, size_t batch, float* logits) const;

 private:
  struct State;
  struct Decoder;
  explicit LanguageModel(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace kvsketch::model
#pragma GCC visibility pop
