// Model quality under a KV-cache policy, measured as llama.cpp measures a quantization type
// (`llama-perplexity --kl-divergence`): the same text through a reference cache and through each
// policy in one process, comparing the next-token distributions at every scored position.
//
// The text is cut into windows of `context` tokens (BOS first where the tokenizer has one) and the
// second half of each is scored, so that every scored token has at least context/2 tokens before
// it. By default the first half is prefilled in chunks as engines prefill a prompt (each chunk
// attending the compressed past and itself exactly) and the second half decoded one token at a
// time: each scored token's distribution is that of a decode step at its position, the cache holding
// the tokens before it as the policy keeps them (recent ones in the fp16 window). Scoring prefill
// instead feeds the whole window in chunks, as llama.cpp scores a batch: a chunk's queries attend
// the chunk's own tokens as the cache holds them after the chunk is appended, so a query early in
// a chunk longer than the window sees its recent neighbours compressed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#pragma GCC visibility push(default)
namespace kvsketch::model {

struct PerplexityConfig {
  std::string model_dir;
  std::string text_path;
  std::vector<std::string> policies;   // KVPolicy specs; "exact" is float32 attention
  std::string reference = "fp16";      // the policy the others are compared with
  size_t context = 0;                  // tokens per window; 0: min(max_position_embeddings, 1024)
  size_t chunk = 256;                  // prefill chunk
  bool score_decode = true;            // the scored half decoded token by token (false: prefilled in chunks)
  size_t windows = 0;                  // windows scored; 0: as many as the text holds
  size_t seeds = 3;                    // codec seeds of a randomized policy (deterministic ones run once)
  size_t depth_buckets = 4;            // KLD reported by position within the window, in this many bands
};

// Statistics of one policy against the reference over the scored tokens (of every seed).
struct QualityStatistics {
  size_t tokens = 0;
  double ppl = 0, ppl_stderr = 0;                 // the policy's perplexity
  double ln_ppl_ratio = 0, ln_ppl_ratio_stderr = 0; // ln(PPL / PPL_ref): the mean of ln p_ref(x) - ln p(x)
  double kld_mean = 0, kld_stderr = 0;
  double kld_median = 0, kld_p90 = 0, kld_p95 = 0, kld_p99 = 0, kld_p999 = 0, kld_max = 0;
  double top1_agreement = 0, top1_stderr = 0;     // argmax equal to the reference's
  double rms_delta_p = 0, rms_delta_p_stderr = 0; // of p(actual token) against the reference's
  std::vector<double> kld_by_depth;               // mean KLD per band of positions
};

struct PolicyQuality {
  std::string policy;
  bool randomized = false;            // its codecs depend on the seed
  size_t seeds = 1;
  double bits_per_value = 0;          // cache bytes * 8 / (tokens * layers * kv_heads * head_dim * 2), all counted
  QualityStatistics pooled;           // all seeds' tokens together
  std::vector<double> kld_mean_per_seed, ppl_per_seed;
};

struct PerplexityReport {
  std::string model_dir, text_path;
  size_t context = 0, windows = 0, scored_tokens = 0, text_tokens = 0;
  bool score_decode = true;
  double reference_ppl = 0, reference_ppl_stderr = 0;
  double reference_bits_per_value = 0;
  std::vector<PolicyQuality> policies;
  std::vector<std::pair<size_t, size_t>> depth_bands;  // [from, to) positions of each band
  double seconds = 0;
};

// Runs the reference and every policy over the text. Errors (a policy that does not parse, a text
// shorter than one window, a model that does not load) name the problem before any work is done.
PerplexityReport run_perplexity(const PerplexityConfig& config);

}  // namespace kvsketch::model
#pragma GCC visibility pop
