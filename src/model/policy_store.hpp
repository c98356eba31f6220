// A model's KV store for a policy named as on the command line: "exact" (float32 attention) or a
// KVPolicy spec (a PagedKVCache holding one sequence), with the bytes it holds. A KVPolicy spec may
// add `|select=SELECTOR` (decode steps through token selectors: a PagedSelectionCache, e.g.
// "tq_mse:b=3|select=magicpig:K=10,L=150") and `|dense=L,L` (layers attended in full, as MagicPIG
// keeps layers 0 and 16 of Llama).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvsketch/model/kv_store.hpp"
#include "kvsketch/model/language_model.hpp"

namespace kvsketch::model {

class PolicyStore {
 public:
  // Throws Error naming the policy when it does not parse.
  PolicyStore(const LanguageModel& model, const std::string& policy, uint64_t seed,
              ChunkAttention chunks = ChunkAttention::kExactChunk);
  // The first sequence.
  KVStore& kv() { return *stores_.front(); }
  // Another sequence in the same cache (or another ExactKV), held by the store.
  KVStore& add_sequence();
  // Whether single-token steps attend through token selectors (`|select=`); chunks of several
  // tokens are prefilled densely either way.
  bool selects() const { return selection_.has_value(); }
  // Bytes held per value stored (keys and values of every layer and KV head, every sequence),
  // everything counted: codes, norms, sinks, window, calibration and the selectors' indexes.
  double bits_per_value() const;

 private:
  const ModelConfig* config_;
  ChunkAttention chunks_;
  std::optional<PagedKVCache> cache_;
  std::optional<PagedSelectionCache> selection_;
  std::vector<std::unique_ptr<KVStore>> stores_;
};

// Whether a policy's codecs depend on the seed (TurboQuant, QJL: random rotations and sketches),
// so that its quality is worth measuring over several seeds. "exact" and fp16, int8, q4_0, KIVI are
// deterministic.
bool policy_is_randomized(const std::string& policy, size_t head_dim);

// Runs `count` tokens through the model in chunks of `chunk`, writing every position's logits
// ([count][vocab]) when logits is not null.
void run_chunks(const LanguageModel& model, KVStore& kv, const int32_t* tokens, size_t count, size_t chunk,
                float* logits);

}  // namespace kvsketch::model
