#include <chrono>

#include "core/require.hpp"
#include "io/file_bytes.hpp"
#include "kvsketch/model/language_model.hpp"
#include "kvsketch/model/quality_eval.hpp"
#include "kvsketch/model/tokenizer.hpp"
#include "model/distribution_comparison.hpp"
#include "model/policy_store.hpp"

namespace kvsketch::model {
namespace {

// The token windows of the text: BOS (where the model has one) and context - 1 tokens each.
std::vector<std::vector<int32_t>> windows_of(const std::vector<int32_t>& tokens, size_t context,
                                             std::optional<int64_t> bos, size_t limit) {
  const size_t body = bos ? context - 1 : context;
  std::vector<std::vector<int32_t>> windows;
  for (size_t at = 0; at + body <= tokens.size() && (limit == 0 || windows.size() < limit); at += body) {
    std::vector<int32_t> w;
    if (bos) w.push_back(static_cast<int32_t>(*bos));
    w.insert(w.end(), tokens.begin() + at, tokens.begin() + at + body);
    windows.push_back(std::move(w));
  }
  return windows;
}

// Every position's logits of a window: its scored positions, from `first` on, decoded one token at a
// time after the rest is prefilled in chunks, or the whole window prefilled. A policy with selectors
// is always decoded there: selectors act on decode steps only (a prompt is prefilled densely, as
// MagicPIG serves a model).
void score_window(const LanguageModel& model, PolicyStore& store, const std::vector<int32_t>& window, size_t first,
                  size_t chunk, bool decode, float* logits) {
  if (!decode && !store.selects())
    return run_chunks(model, store.kv(), window.data(), window.size(), chunk, logits);
  const size_t vocab = model.config().vocab_size;
  run_chunks(model, store.kv(), window.data(), first, chunk, logits);
  run_chunks(model, store.kv(), window.data() + first, window.size() - first, 1, logits + first * vocab);
}

}  // namespace

PerplexityReport run_perplexity(const PerplexityConfig& config) {
  const auto started = std::chrono::steady_clock::now();
  const LanguageModel model = LanguageModel::load(config.model_dir);
  const Tokenizer tokenizer = Tokenizer::load(config.model_dir);
  const ModelConfig& mc = model.config();
  const size_t context = config.context ? config.context : std::min<size_t>(mc.max_position_embeddings, 1024);
  require(context >= 16, "--context {} is too short to score (at least 16 tokens)", context);
  require(config.chunk > 0, "--chunk must be positive");
  require(config.seeds >= 1 && config.seeds <= 64, "--seeds {} is not in 1..64", config.seeds);
  require(config.depth_buckets >= 1 && config.depth_buckets <= context / 2, "depth bands {} not in 1..{}",
          config.depth_buckets, context / 2);
  require(!config.policies.empty(), "no policies given");
  // Every policy is checked before any work, so that a typo does not surface after minutes.
  std::vector<bool> randomized;
  for (const std::string& p : config.policies) randomized.push_back(policy_is_randomized(p, mc.head_dim));
  policy_is_randomized(config.reference, mc.head_dim);

  std::string text;
  read_whole_file(config.text_path, "text", text);
  const std::vector<int32_t> tokens = tokenizer.encode(text, false);
  const auto windows = windows_of(tokens, context, mc.bos_token_id, config.windows);
  require(!windows.empty(), "text '{}' holds {} tokens, fewer than one window of {}", config.text_path, tokens.size(),
          context);

  PerplexityReport report;
  report.model_dir = config.model_dir;
  report.text_path = config.text_path;
  report.context = context;
  report.windows = windows.size();
  report.score_decode = config.score_decode;
  report.text_tokens = tokens.size();
  const size_t first = context / 2, vocab = mc.vocab_size, bands = config.depth_buckets;
  for (size_t b = 0; b < bands; ++b)
    report.depth_bands.emplace_back(first + b * (context - 1 - first) / bands, first + (b + 1) * (context - 1 - first) / bands);
  auto band_of = [&](size_t position) {
    for (size_t b = 0; b < bands; ++b)
      if (position < report.depth_bands[b].second) return b;
    return bands - 1;
  };

  DistributionComparison reference_self;
  std::vector<std::vector<DistributionComparison>> comparisons(config.policies.size());
  std::vector<std::vector<double>> bits(config.policies.size());
  for (size_t p = 0; p < config.policies.size(); ++p) comparisons[p].resize(randomized[p] ? config.seeds : 1);
  double reference_bits = 0;

  std::vector<float> logits(context * vocab);
  std::vector<double> reference((context - 1 - first) * vocab);
  // Prefill scoring reads each chunk back from the cache, as llama.cpp scores a batch; decode
  // scoring prefills its context as engines do, each chunk attending itself exactly.
  const ChunkAttention chunks = config.score_decode ? ChunkAttention::kExactChunk : ChunkAttention::kThroughCache;
  for (const auto& window : windows) {
    {
      PolicyStore store(model, config.reference, 0, chunks);
      score_window(model, store, window, first, config.chunk, config.score_decode, logits.data());
      reference_bits = store.bits_per_value();
    }
    for (size_t i = first; i + 1 < context; ++i) {
      const auto row = log_softmax(logits.data() + i * vocab, vocab);
      std::copy(row.begin(), row.end(), reference.begin() + (i - first) * vocab);
      reference_self.add(row.data(), logits.data() + i * vocab, vocab, window[i + 1], band_of(i));
    }
    for (size_t p = 0; p < config.policies.size(); ++p)
      for (size_t seed = 0; seed < comparisons[p].size(); ++seed) {
        PolicyStore store(model, config.policies[p], seed, chunks);
        score_window(model, store, window, first, config.chunk, config.score_decode, logits.data());
        bits[p].push_back(store.bits_per_value());
        for (size_t i = first; i + 1 < context; ++i)
          comparisons[p][seed].add(reference.data() + (i - first) * vocab, logits.data() + i * vocab, vocab,
                                   window[i + 1], band_of(i));
      }
  }

  const QualityStatistics reference_stats = reference_self.summary(bands);
  report.reference_ppl = reference_stats.ppl;
  report.reference_ppl_stderr = reference_stats.ppl_stderr;
  report.reference_bits_per_value = reference_bits;
  report.scored_tokens = reference_stats.tokens;
  for (size_t p = 0; p < config.policies.size(); ++p) {
    PolicyQuality q;
    q.policy = config.policies[p];
    q.randomized = randomized[p];
    q.seeds = comparisons[p].size();
    double bit_sum = 0;
    for (double b : bits[p]) bit_sum += b;
    q.bits_per_value = bit_sum / bits[p].size();
    for (const auto& c : comparisons[p]) {
      q.kld_mean_per_seed.push_back(c.mean_kld());
      q.ppl_per_seed.push_back(c.ppl());
    }
    // Pooled statistics: every seed's tokens as one sample.
    q.pooled = [&] {
      if (comparisons[p].size() == 1) return comparisons[p][0].summary(bands);
      DistributionComparison all;
      for (const auto& c : comparisons[p]) all.append(c);
      return all.summary(bands);
    }();
    report.policies.push_back(std::move(q));
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

}  // namespace kvsketch::model
