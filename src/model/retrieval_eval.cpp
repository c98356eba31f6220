#include "kvsketch/model/retrieval_eval.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>

#include "core/require.hpp"
#include "io/file_bytes.hpp"
#include "kvsketch/model/language_model.hpp"
#include "kvsketch/model/tokenizer.hpp"
#include "model/policy_store.hpp"
#include "model/retrieval_tasks.hpp"

namespace kvsketch::model {
namespace {

// A prompt as tokens, with the token positions of each answer.
struct TokenPrompt {
  std::vector<int32_t> tokens;
  std::vector<std::pair<size_t, size_t>> answers;  // [begin, end) token positions
};

TokenPrompt tokenize(const Tokenizer& tokenizer, const RetrievalPrompt& prompt) {
  TokenPrompt t;
  t.tokens = tokenizer.encode(prompt.text);
  for (const auto& [begin, end] : prompt.answers) {
    const size_t from = tokenizer.encode(prompt.text.substr(0, begin)).size();
    const auto through = tokenizer.encode(prompt.text.substr(0, end));
    // The answer's tokens must be the same alone as inside the text, or "reproducing" it is moot.
    require(through.size() > from && through.size() <= t.tokens.size() &&
                std::equal(through.begin(), through.end(), t.tokens.begin()),
            "retrieval: the tokenizer does not cut the prompt at the answer's start; cannot score it");
    t.answers.emplace_back(from, through.size());
  }
  return t;
}

// Whether each answer is the greedy continuation. The prompt up to its first answer is prefilled in
// chunks; from the token before that answer on, every token is a decode step (the answers fed as
// given), so each answer token is predicted by the step that would generate it, over the cache as
// the policy keeps it. A prefill would attend a chunk's own tokens exactly (as engines prefill) and
// miss the codes whenever a needle and its question share a chunk.
std::vector<bool> score(const LanguageModel& model, KVStore& kv, const TokenPrompt& prompt, size_t chunk) {
  const size_t vocab = model.config().vocab_size, n = prompt.tokens.size();
  size_t decoded_from = n;
  for (const auto& answer : prompt.answers) decoded_from = std::min(decoded_from, std::max<size_t>(answer.first, 1) - 1);
  std::vector<int> predicted(n, -1);
  run_chunks(model, kv, prompt.tokens.data(), decoded_from, chunk, nullptr);
  std::vector<float> logits(vocab);
  for (size_t at = decoded_from; at < n; ++at) {
    model.forward(kv, prompt.tokens.data() + at, 1, logits.data(), 1);
    predicted[at] = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  std::vector<bool> correct;
  for (const auto& [begin, end] : prompt.answers) {
    bool all = true;
    for (size_t p = begin; p < end; ++p) all = all && predicted[p - 1] == prompt.tokens[p];
    correct.push_back(all);
  }
  return correct;
}

}  // namespace

RetrievalReport run_retrieval(const RetrievalConfig& config) {
  const auto started = std::chrono::steady_clock::now();
  const LanguageModel model = LanguageModel::load(config.model_dir);
  const Tokenizer tokenizer = Tokenizer::load(config.model_dir);
  require(!config.policies.empty(), "no policies given");
  require(config.samples >= 1, "--samples must be at least 1");
  require(config.chunk >= 1, "--chunk must be positive");
  for (const std::string& p : config.policies) policy_is_randomized(p, model.config().head_dim);
  std::string haystack;
  read_whole_file(config.text_path, "text", haystack);
  std::vector<std::string> words;
  for (const std::string& w : words_of(haystack.substr(0, 400000)))
    if (tokenizer.encode(" " + w, false).size() <= 3) words.push_back(w);
  const RetrievalTasks tasks(haystack, words);
  const size_t probe = std::min<size_t>(haystack.size(), 40000);
  const double chars_per_token = static_cast<double>(probe) / tokenizer.encode(haystack.substr(0, probe), false).size();

  // The cells and their prompts, shared by every policy.
  struct Cell {
    RetrievalCell shape;
    std::vector<TokenPrompt> prompts;
  };
  std::vector<Cell> cells;
  // A prompt of at most `tokens` tokens and close to it: the length in characters is corrected
  // from each attempt's token count, and the longest prompt that fits is kept.
  auto fit = [&](size_t tokens, const std::function<RetrievalPrompt(TaskRandom&, size_t)>& make, TaskRandom& random) {
    double chars = tokens * chars_per_token;
    std::optional<TokenPrompt> best;
    TaskRandom after = random;
    for (int attempt = 0; attempt < 12; ++attempt) {
      TaskRandom copy = random;
      TokenPrompt p = tokenize(tokenizer, make(copy, static_cast<size_t>(chars)));
      const size_t n = p.tokens.size();
      if (n <= tokens && (!best || n > best->tokens.size())) {
        best = std::move(p);
        after = copy;
      }
      if (best && best->tokens.size() >= tokens - tokens / 64) break;
      chars *= (n <= tokens ? 0.995 : 0.985) * tokens / std::max<size_t>(n, 1);
    }
    require(best.has_value(), "retrieval: cannot fit a prompt into {} tokens", tokens);
    random = after;
    return std::move(*best);
  };
  TaskRandom random(config.seed * 0x2545F4914F6CDD1Dull + 17);
  if (config.task == RetrievalTask::kMqar) {
    for (size_t pairs : config.pairs) {
      Cell cell{{pairs, 0.0, 0.0, 0, 0}, {}};
      for (size_t s = 0; s < config.samples; ++s) cell.prompts.push_back(tokenize(tokenizer, tasks.mqar(random, pairs)));
      cells.push_back(std::move(cell));
    }
  } else {
    require(!config.contexts.empty(), "no --contexts given");
    const std::vector<double> depths = config.task == RetrievalTask::kPasskey ? config.depths : std::vector<double>{0};
    for (size_t context : config.contexts)
      for (double depth : depths) {
        Cell cell{{context, depth, 0.0, 0, 0}, {}};
        for (size_t s = 0; s < config.samples; ++s)
          cell.prompts.push_back(fit(context,
                                     [&](TaskRandom& r, size_t chars) {
                                       return config.task == RetrievalTask::kPasskey
                                                  ? tasks.passkey(r, chars, depth)
                                                  : tasks.needles(r, chars, config.needles);
                                     },
                                     random));
        cells.push_back(std::move(cell));
      }
  }

  RetrievalReport report;
  report.task = config.task == RetrievalTask::kPasskey ? "passkey" : config.task == RetrievalTask::kNeedles ? "needles"
                                                                                                            : "mqar";
  for (const std::string& policy : config.policies) {
    PolicyRetrieval result;
    result.policy = policy;
    size_t correct = 0, total = 0, longest = 0;
    for (const Cell& cell : cells) {
      RetrievalCell c = cell.shape;
      for (const TokenPrompt& p : cell.prompts) c.tokens += static_cast<double>(p.tokens.size()) / cell.prompts.size();
      for (size_t s = 0; s < cell.prompts.size(); ++s) {
        PolicyStore store(model, policy, s);
        for (bool hit : score(model, store.kv(), cell.prompts[s], config.chunk)) {
          c.correct += hit;
          ++c.total;
        }
        if (cell.prompts[s].tokens.size() >= longest) {
          longest = cell.prompts[s].tokens.size();
          result.bits_per_value = store.bits_per_value();
        }
      }
      correct += c.correct;
      total += c.total;
      result.cells.push_back(c);
    }
    result.accuracy = total ? static_cast<double>(correct) / total : 0;
    report.policies.push_back(std::move(result));
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

}  // namespace kvsketch::model
