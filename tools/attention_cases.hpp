// The caches `kvsketch attention` and `kvsketch sparse` evaluate: synthetic regimes or captured
// keys, values and queries (any matrix file: .npy, .safetensors[:NAME], .fvecs, .tsv).
#pragma once
#include <string>
#include <vector>

#include "kvsketch/eval/attention_eval.hpp"

namespace kvsketch::tools {

struct CaseArguments {
  std::string synthetic, keys, values, queries;
  std::string model = "independent";  // of the synthetic cache: independent or hidden-state
  size_t tokens = 4096, dim = 128, query_count = 16;
  uint64_t seed = 1;
};

inline constexpr const char* kSyntheticModelHelp =
    "How the synthetic cache is made: independent (keys and values drawn apart) or hidden-state "
    "(both projections of one hidden state per token)";

// --synthetic NAME (default: every regime) or all of --keys, --values, --queries (the first
// `tokens` rows of the keys and values).
std::vector<AttentionCase> load_attention_cases(const CaseArguments& args);

}  // namespace kvsketch::tools
