// kvsketch generate: text from a model through a KV-cache policy, streamed as it is decoded, with
// prefill and decode speed and the bytes the cache holds.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <iostream>

#include "commands.hpp"
#include "core/require.hpp"
#include "kvsketch/model/language_model.hpp"
#include "kvsketch/model/tokenizer.hpp"
#include "kvsketch/random.hpp"
#include "model/policy_store.hpp"

namespace kvsketch::tools {
namespace {

struct Arguments {
  std::string model, prompt, policy = "tq_mse:b=3|tq_mse:b=3";
  size_t max_tokens = 64, chunk = 256;
  double temperature = 0;
  uint64_t seed = 0;
};

// The next token: the argmax, or a draw from softmax(logits / temperature).
int32_t choose(const std::vector<float>& logits, double temperature, RandomStream& random) {
  if (temperature <= 0) return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  const float top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> weights(logits.size());
  double total = 0;
  for (size_t i = 0; i < logits.size(); ++i) total += weights[i] = std::exp((logits[i] - top) / temperature);
  double pick = random.uniform() * total;
  for (size_t i = 0; i < weights.size(); ++i)
    if ((pick -= weights[i]) <= 0) return static_cast<int32_t>(i);
  return static_cast<int32_t>(weights.size() - 1);
}

void run(const Arguments& args) {
  using Clock = std::chrono::steady_clock;
  require(args.temperature >= 0 && args.temperature <= 100, "--temperature {} is not in [0, 100]", args.temperature);
  const auto model = model::LanguageModel::load(args.model);
  const auto tokenizer = model::Tokenizer::load(args.model);
  model::PolicyStore store(model, args.policy, args.seed);
  const std::vector<int32_t> prompt = tokenizer.encode(args.prompt);
  require(!prompt.empty(), "--prompt gives no tokens");
  std::vector<float> logits(model.config().vocab_size);
  const auto started = Clock::now();
  for (size_t at = 0; at < prompt.size(); at += args.chunk) {
    const size_t n = std::min(args.chunk, prompt.size() - at);
    model.forward(store.kv(), prompt.data() + at, n, logits.data(), at + n == prompt.size() ? 1 : 0);
  }
  const double prefill = std::chrono::duration<double>(Clock::now() - started).count();
  RandomStream random(args.seed, StreamPurpose::kTest, {prompt.size()});
  std::vector<int32_t> generated, all = prompt;
  // The continuation is the decoded prompt-and-generation past the decoded prompt, so that
  // decoders that treat the first token apart (SentencePiece's leading space) print it as it reads.
  std::string shown = tokenizer.decode(prompt);
  std::cout << shown << std::flush;
  const auto decoding = Clock::now();
  for (size_t i = 0; i < args.max_tokens; ++i) {
    const int32_t next = choose(logits, args.temperature, random);
    if (model.config().eos_token_id && next == *model.config().eos_token_id) break;
    generated.push_back(next);
    all.push_back(next);
    // Streamed as whole characters: text is printed once it no longer ends inside one.
    const std::string text = tokenizer.decode(all);
    if (text.size() >= 3 && text.compare(text.size() - 3, 3, "\xEF\xBF\xBD") == 0) continue;
    if (text.size() > shown.size() && text.compare(0, shown.size(), shown) == 0) std::cout << text.substr(shown.size()) << std::flush;
    shown = text;
    if (i + 1 < args.max_tokens) model.forward(store.kv(), &next, 1, logits.data(), 1);
  }
  const double decode = std::chrono::duration<double>(Clock::now() - decoding).count();
  std::cout << std::endl;
  std::cerr << fmt::format("prompt {} tokens at {:.0f} tokens/s, {} generated at {:.1f} tokens/s; cache {} bytes "
                           "({:.2f} bits per value, policy {})\n",
                           prompt.size(), prompt.size() / prefill, generated.size(),
                           generated.empty() ? 0.0 : generated.size() / decode, store.kv().bytes(),
                           store.bits_per_value(), args.policy);
}

}  // namespace

std::function<void()> add_generate_command(CLI::App& app) {
  auto args = std::make_shared<Arguments>();
  auto* command = app.add_subcommand("generate", "Generate text with a model through a KV-cache policy");
  command->add_option("--model", args->model, "Hugging Face model folder")->required();
  command->add_option("--prompt", args->prompt, "prompt text")->required();
  command->add_option("--policy", args->policy, "KV policy (kv_policy.hpp), or exact")
      ->default_val("tq_mse:b=3|tq_mse:b=3");
  command->add_option("--max-tokens", args->max_tokens, "tokens to generate")->default_val(64)->check(
      CLI::Range(1, 1 << 20));
  command->add_option("--temperature", args->temperature, "0: greedy")->default_val(0);
  command->add_option("--seed", args->seed, "seed of sampling and of the policy's codecs")->default_val(0);
  command->add_option("--chunk", args->chunk, "prefill chunk")->default_val(256)->check(CLI::Range(1, 1 << 20));
  return [command, args] {
    if (command->parsed()) run(*args);
  };
}

}  // namespace kvsketch::tools
