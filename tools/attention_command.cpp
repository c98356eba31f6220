// kvsketch attention: fidelity of cache policies at equal bytes, on the synthetic generator or on
// captured tensors (.npy, [tokens, head_dim] keys and values, [queries, head_dim] queries).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <map>

#include "commands.hpp"
#include "kvsketch/attention_eval.hpp"
#include "kvsketch/error.hpp"
#include "kvsketch/io.hpp"
#include "kvsketch/kv_policy.hpp"
#include "kvsketch/synthetic_cache.hpp"
#include "attention_cases.hpp"
#include "json_values.hpp"
#include "list_options.hpp"

namespace kvsketch::tools {
namespace {

struct Arguments {
  std::string policies;
  CaseArguments cases;
  bool json = false;
};

void run(const Arguments& args) {
  std::vector<std::string> policies = split_list(args.policies, ';');
  if (policies.empty()) policies = standard_policies();
  for (const std::string& policy : policies) KVPolicy::parse(policy);  // a bad one before any output or work
  const auto cases = load_attention_cases(args.cases);
  nlohmann::json rows = nlohmann::json::array();
  if (!args.json)
    std::cout << fmt::format("{:<28} {:<12} {:>6} {:>10} {:>9} {:>9} {:>6} {:>18} {:>9} {:>8}\n", "policy", "regime",
                             "bits", "bytes", "rel_err", "kl", "top8", "score bias ± se", "us/query", "vs fp16");
  for (const auto& data : cases) {
    std::vector<AttentionEvalRow> results;
    double fp16_ns = 0.0;
    for (const std::string& policy : policies) {
      results.push_back(evaluate_policy(policy, data, args.cases.seed));
      if (policy == "fp16") fp16_ns = results.back().ns_per_query;
    }
    for (const auto& r : results) {
      const double speedup = fp16_ns > 0.0 ? fp16_ns / r.ns_per_query : 0.0;
      if (args.json) {
        rows.push_back({{"policy", r.policy}, {"regime", r.regime}, {"tokens", r.tokens},
                        {"bits_per_value", r.bits_per_value}, {"bytes", r.bytes}, {"rel_error", r.rel_error},
                        {"kl", r.kl}, {"top8_overlap", r.top8_overlap}, {"score_bias", r.score_bias},
                        {"score_bias_stderr", r.score_bias_stderr}, {"ns_per_query", r.ns_per_query},
                        {"speedup_vs_fp16", measured_ratio(speedup)}});
        continue;
      }
      std::cout << fmt::format("{:<28} {:<12} {:>6.2f} {:>10} {:>9.5f} {:>9.2e} {:>6.3f} {:>9.4f} ± {:<6.4f} {:>9.1f} {:>8}\n",
                               r.policy, r.regime, r.bits_per_value, r.bytes, r.rel_error, r.kl, r.top8_overlap,
                               r.score_bias, r.score_bias_stderr, r.ns_per_query / 1000.0,
                               speedup > 0 ? fmt::format("{:.2f}x", speedup) : "-");
    }
  }
  if (args.json) std::cout << rows.dump(2) << "\n";
}

}  // namespace

std::function<void()> add_attention_command(CLI::App& app) {
  auto args = std::make_shared<Arguments>();
  auto* command = app.add_subcommand("attention", "Attention fidelity of cache policies at equal bytes");
  command->add_option("--policies", args->policies,
                      "Policies separated by ';' (KEYCODEC|VALUECODEC|sinks=N|window=N|block=N|layout=L|layerL=K/V); "
                      "default: the standard comparison")
      ->check(NonEmptyList(';'));
  command->add_option("--synthetic", args->cases.synthetic, "Synthetic regime: default, sink, needle, peaked, long-tailed, flat");
  command->add_option("--synthetic-model", args->cases.model, kSyntheticModelHelp);
  command->add_option("--keys", args->cases.keys, "Captured keys, [tokens, head_dim] (.npy, .safetensors[:NAME], .fvecs, .tsv)");
  command->add_option("--values", args->cases.values, "Captured values, [tokens, head_dim]");
  command->add_option("--queries", args->cases.queries, "Captured queries, [queries, head_dim]");
  command->add_option("--tokens", args->cases.tokens, "Tokens in the cache (captured: the first N)")->check(CLI::Range(10, 1 << 24));
  command->add_option("--dim", args->cases.dim, "Head dimension of the synthetic cache")->check(CLI::Range(8, 1024));
  command->add_option("--num-queries", args->cases.query_count, "Queries per synthetic regime")->check(CLI::Range(1, 4096));
  command->add_option("--seed", args->cases.seed, "Seed of data and codecs");
  command->add_flag("--json", args->json, "JSON rows instead of a table");
  return [command, args] {
    if (command->parsed()) run(*args);
  };
}

}  // namespace kvsketch::tools
