// End-to-end speed of a model under KV-cache policies: prefill tokens/s through the cache (chunked),
// then decode tokens/s at that depth (greedy, one token per step; with a batch, that many sequences
// of the context in one cache, each step one token of each in one forward_batch), each policy's
// ratio to fp16 in the same run. The context is the given text's tokens, repeated as needed.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#pragma GCC visibility push(default)
namespace kvsketch::model {

struct DecodeBenchConfig {
  std::string model_dir;
  std::string text_path;
  std::vector<size_t> contexts;
  std::vector<std::string> policies;
  size_t decode_tokens = 32;   // steps timed after the prefill (the median step is reported)
  size_t chunk = 512;          // prefill chunk
  size_t batch = 1;            // sequences decoded together
};

struct DecodeBenchRow {
  std::string policy;
  size_t context = 0;
  double prefill_tokens_per_second = 0;
  size_t batch = 1;
  double decode_tokens_per_second = 0;  // batch / median step time: tokens of every sequence
  double decode_ratio_to_fp16 = 0;      // 0 where fp16 was not run
  double prefill_ratio_to_fp16 = 0;
  size_t cache_bytes = 0;               // after the prefill, every sequence, everything counted
  double bits_per_value = 0;
};

struct DecodeBenchReport {
  size_t threads = 0;
  double weight_bytes = 0;
  std::vector<DecodeBenchRow> rows;
};

DecodeBenchReport run_decode_bench(const DecodeBenchConfig& config);

}  // namespace kvsketch::model
#pragma GCC visibility pop
