// A generator of LLM-like key/value caches and decode queries, for evaluating policies when no
// captured cache is at hand. What it imitates (see README, "The synthetic cache"):
//   keys    a common offset vector, a few high-magnitude outlier channels (x10), RoPE-rotated
//           channel pairs (theta_i = 10000^(-2i/d), position t), and attention-sink tokens at
//           the start whose keys share a direction that every query also has;
//   values  an offset and per-channel scales, two channels x3;
//   queries one regime per set:
//     sink         most mass on the first 4 tokens,
//     needle       a few (3) body tokens stand out by about 10 logits,
//     peaked       a random direction with logit spread 3.0 (a few tokens dominate),
//     long-tailed  logit spread 1.5 (heavy tail of moderately weighted tokens),
//     flat         logit spread 0.3 (nearly uniform).
// That is the `independent` model. The `hidden-state` model (src/eval/hidden_state_cache.cpp) makes
// keys and values as two projections of one hidden state per token, keys in a cone
// around their centroid, and queries that ask for a hidden-state direction; regimes and sinks
// are the same.
// Everything is computed with + - * / only from the seeded streams: same bits on every machine.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvsketch {

struct SyntheticCache {
  std::string regime;
  size_t tokens = 0, dim = 0, queries = 0;
  std::vector<float> keys, values;  // tokens x dim
  std::vector<float> query_rows;    // queries x dim
};

enum class SyntheticModel { kIndependent, kHiddenState };
// "independent" or "hidden-state"; anything else is an error naming the choices.
SyntheticModel parse_synthetic_model(const std::string& name);

// Regimes in the order `--synthetic default` runs them.
const std::vector<std::string>& synthetic_regimes();

// Keys and values depend on (tokens, dim, seed, model) only, so every regime sees the same cache.
SyntheticCache make_synthetic_cache(const std::string& regime, size_t tokens, size_t dim, size_t queries,
                                    uint64_t seed, SyntheticModel model = SyntheticModel::kIndependent);

}  // namespace kvsketch
