// Long-context retrieval accuracy of a model under KV-cache policies: passkey, multi-key needles
// with distractors, and multi-query associative recall (MQAR), in the formats the reference models
// are trained on. An answer counts as retrieved when greedy decoding reproduces every one of its
// tokens: the prompt is prefilled up to its first answer, then every token from there on is a decode
// step (the argmax at each answer position given the prompt and the answers so far).
// Every policy sees the same prompts; randomized policies use a different codec seed per sample.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#pragma GCC visibility push(default)
namespace kvsketch::model {

enum class RetrievalTask { kPasskey, kNeedles, kMqar };

struct RetrievalConfig {
  std::string model_dir;
  std::string text_path;                  // the haystack the fillers are cut from
  RetrievalTask task = RetrievalTask::kPasskey;
  std::vector<size_t> contexts;           // prompt lengths in tokens (passkey, needles)
  std::vector<double> depths{0.0, 0.25, 0.5, 0.75, 1.0};  // needle depth (passkey)
  std::vector<size_t> pairs{16, 32, 64};  // key-value pairs (mqar)
  size_t needles = 4;                     // needles per prompt (needles)
  size_t samples = 10;                    // prompts per cell
  std::vector<std::string> policies;      // KVPolicy specs, or "exact"
  size_t chunk = 256;                     // prefill chunk
  uint64_t seed = 0;
};

struct RetrievalCell {
  size_t context = 0;      // tokens asked for, or pairs for mqar
  double depth = 0;
  double tokens = 0;       // the prompts' mean length in tokens (at most context)
  size_t correct = 0, total = 0;
};

struct PolicyRetrieval {
  std::string policy;
  double bits_per_value = 0;  // at the longest prompt, everything counted
  std::vector<RetrievalCell> cells;
  double accuracy = 0;        // over all cells
};

struct RetrievalReport {
  std::string task;
  std::vector<PolicyRetrieval> policies;
  double seconds = 0;
};

RetrievalReport run_retrieval(const RetrievalConfig& config);

}  // namespace kvsketch::model
#pragma GCC visibility pop
