#include "kvsketch/model/decode_bench.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>

#include "core/require.hpp"
#include "io/file_bytes.hpp"
#include "kvsketch/model/language_model.hpp"
#include "kvsketch/model/tokenizer.hpp"
#include "model/policy_store.hpp"

namespace kvsketch::model {

DecodeBenchReport run_decode_bench(const DecodeBenchConfig& config) {
  using Clock = std::chrono::steady_clock;
  const LanguageModel model = LanguageModel::load(config.model_dir);
  const Tokenizer tokenizer = Tokenizer::load(config.model_dir);
  require(!config.policies.empty() && !config.contexts.empty(), "bench decode: no policies or contexts given");
  require(config.decode_tokens >= 1 && config.chunk >= 1 && config.batch >= 1,
          "bench decode: decode tokens, chunk and batch must be positive");
  for (const std::string& p : config.policies) policy_is_randomized(p, model.config().head_dim);
  std::string text;
  read_whole_file(config.text_path, "text", text);
  const std::vector<int32_t> source = tokenizer.encode(text, false);
  require(source.size() >= 16, "text '{}' holds only {} tokens", config.text_path, source.size());

  DecodeBenchReport report;
  report.threads = static_cast<size_t>(omp_get_max_threads());
  report.weight_bytes = static_cast<double>(model.weight_bytes());
  const size_t vocab = model.config().vocab_size;
  for (size_t context : config.contexts) {
    std::vector<int32_t> tokens(context);
    for (size_t i = 0; i < context; ++i) tokens[i] = source[i % source.size()];
    const size_t first_row = report.rows.size();
    for (const std::string& policy : config.policies) {
      PolicyStore store(model, policy, 0);
      std::vector<KVStore*> sequences{&store.kv()};
      while (sequences.size() < config.batch) sequences.push_back(&store.add_sequence());
      DecodeBenchRow row;
      row.policy = policy;
      row.context = context;
      row.batch = config.batch;
      std::vector<float> logits(config.batch * vocab);
      for (size_t b = 0; b < config.batch; ++b) {
        // The first sequence's prefill is timed; the others fill the batch.
        const auto started = Clock::now();
        for (size_t at = 0; at < context; at += config.chunk) {
          const size_t n = std::min(config.chunk, context - at);
          model.forward(*sequences[b], tokens.data() + at, n, logits.data() + b * vocab, at + n == context ? 1 : 0);
        }
        if (b == 0)
          row.prefill_tokens_per_second = context / std::chrono::duration<double>(Clock::now() - started).count();
      }
      for (const KVStore* sequence : sequences) row.cache_bytes += sequence->bytes();
      row.bits_per_value = store.bits_per_value();
      std::vector<double> steps;
      std::vector<int32_t> next(config.batch);
      for (size_t s = 0; s < config.decode_tokens; ++s) {
        for (size_t b = 0; b < config.batch; ++b)
          next[b] = static_cast<int32_t>(
              std::max_element(logits.begin() + b * vocab, logits.begin() + (b + 1) * vocab) -
              (logits.begin() + b * vocab));
        const auto step_started = Clock::now();
        if (config.batch == 1)
          model.forward(*sequences[0], next.data(), 1, logits.data(), 1);
        else
          model.forward_batch(sequences.data(), next.data(), config.batch, logits.data());
        steps.push_back(std::chrono::duration<double>(Clock::now() - step_started).count());
      }
      std::nth_element(steps.begin(), steps.begin() + steps.size() / 2, steps.end());
      row.decode_tokens_per_second = config.batch / steps[steps.size() / 2];
      report.rows.push_back(row);
    }
    for (size_t i = first_row; i < report.rows.size(); ++i)
      for (size_t j = first_row; j < report.rows.size(); ++j)
        if (report.rows[j].policy == "fp16") {
          report.rows[i].decode_ratio_to_fp16 = report.rows[i].decode_tokens_per_second / report.rows[j].decode_tokens_per_second;
          report.rows[i].prefill_ratio_to_fp16 =
              report.rows[i].prefill_tokens_per_second / report.rows[j].prefill_tokens_per_second;
        }
  }
  return report;
}

}  // namespace kvsketch::model
