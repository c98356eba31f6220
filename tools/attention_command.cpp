// kvsketch attention: fidelity of cache policies at equal bytes, on the synthetic generator or on
// captured tensors (.npy, [tokens, head_dim] keys and values, [queries, head_dim] queries); a
// policy's cache can be saved (--save-cache) and a saved cache evaluated again (--cache).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>

#include "attention_cases.hpp"
#include "commands.hpp"
#include "json_values.hpp"
#include "kvsketch/eval/attention_eval.hpp"
#include "core/require.hpp"
#include "kvsketch/kv_policy.hpp"
#include "kvsketch/limits.hpp"
#include "list_options.hpp"
#include "progress.hpp"
#include "text_table.hpp"

namespace kvsketch::tools {
namespace {

// Timing spreads ((p75 - p25) / median) above this are flagged: the machine was busy.
constexpr double kNoisySpread = 0.25;
constexpr int kTimedCalls = 21;  // decode calls timed per policy and case

struct Arguments {
  std::string policies, save_cache, cache;
  CaseArguments cases;
  int threads = 1;
  bool json = false;
};

struct Measured {
  AttentionEvalRow row;
  double speedup = 0.0;
};

void print_table(const std::vector<Measured>& results, int threads) {
  TextTable table({"<policy", "<regime", "bits", "bytes", "rel_err", "kl", "top8", "score err ± se(q)",
                   "us/query", "spread", "vs fp16"});
  bool noisy = false;
  for (const auto& [r, speedup] : results) {
    noisy = noisy || r.ns_spread > kNoisySpread;
    table.add({r.policy, r.regime, fmt::format("{:.2f}", r.bits_per_value), std::to_string(r.bytes),
               fmt::format("{:.5f}", r.rel_error), fmt::format("{:.2e}", r.kl), fmt::format("{:.3f}", r.top8_overlap),
               fmt::format("{:+.4f} ± {:.4f}", r.score_error_mean, r.score_error_stderr_queries),
               fmt::format("{:.1f}", r.ns_per_query / 1000.0), fmt::format("{:.0f}%", 100.0 * r.ns_spread),
               speedup > 0 ? fmt::format("{:.2f}x", speedup) : "-"});
  }
  table.print(std::cout);
  std::cout << fmt::format(
      "score err: mean logit error over the compressed body ± its standard error across queries, for this one\n"
      "codec draw (not a test of bias over draws). Times: median of {} calls on {} thread{}; spread: (p75 - p25) / "
      "median\n",
      kTimedCalls, threads, threads == 1 ? "" : "s");
  if (noisy)
    std::cerr << fmt::format("kvsketch: warning: some timings spread by more than {:.0f}% (the machine is busy); "
                             "their speed ratios are unreliable\n",
                             100.0 * kNoisySpread);
}

void run(const Arguments& args) {
  std::vector<std::string> policies = split_list(args.policies, ';');
  require(args.cache.empty() || policies.empty(), "--cache evaluates the saved cache's own policy; leave out --policies");
  if (policies.empty() && args.cache.empty()) policies = standard_policies();
  for (const std::string& policy : policies) KVPolicy::parse(policy);  // a bad one before any output or work
  const auto cases = load_attention_cases(args.cases);
  require(args.save_cache.empty() || (policies.size() == 1 && cases.size() == 1),
          "--save-cache saves one cache: give one policy (--policies) and one case (captured tensors or one "
          "--synthetic regime); got {} policies and {} cases",
          policies.size(), cases.size());
  require(args.cache.empty() || cases.size() == 1,
          "--cache: give the tensors the cache was built from (--keys/--values/--queries or one --synthetic regime)");
  std::vector<Measured> results;
  Progress progress(!args.json, cases.size() * std::max<size_t>(policies.size(), 1));
  for (const auto& data : cases) {
    const size_t first = results.size();
    double fp16_ns = 0.0;
    if (!args.cache.empty()) {
      progress.step(fmt::format("{} from {}", data.name, args.cache));
      results.push_back({evaluate_cache(KVCache::load(args.cache), data, kTimedCalls, args.threads)});
    }
    for (const std::string& policy : policies) {
      progress.step(fmt::format("{} {}", data.name, policy));
      const KVCache cache = build_policy_cache(policy, data, args.cases.seed);
      if (!args.save_cache.empty()) cache.save(args.save_cache);
      results.push_back({evaluate_cache(cache, data, kTimedCalls, args.threads)});
      results.back().row.policy = policy;  // as given, not the canonical spec
      if (policy == "fp16") fp16_ns = results.back().row.ns_per_query;
    }
    for (size_t i = first; i < results.size(); ++i)
      results[i].speedup = fp16_ns > 0.0 ? fp16_ns / results[i].row.ns_per_query : 0.0;
  }
  if (!args.json) {
    print_table(results, args.threads);
    if (!args.save_cache.empty()) std::cout << "saved the cache to " << args.save_cache << "\n";
    return;
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [r, speedup] : results)
    rows.push_back({{"policy", r.policy}, {"regime", r.regime}, {"tokens", r.tokens},
                    {"bits_per_value", r.bits_per_value}, {"bytes", r.bytes}, {"rel_error", r.rel_error},
                    {"kl", r.kl}, {"top8_overlap", r.top8_overlap}, {"score_error_mean", r.score_error_mean},
                    {"score_error_stderr_queries", r.score_error_stderr_queries}, {"ns_per_query", r.ns_per_query},
                    {"ns_spread", r.ns_spread}, {"threads", args.threads}, {"speedup_vs_fp16", measured_ratio(speedup)}});
  std::cout << rows.dump(2) << "\n";
}

}  // namespace

std::function<void()> add_attention_command(CLI::App& app) {
  auto args = std::make_shared<Arguments>();
  auto* command = app.add_subcommand("attention", "Attention fidelity of cache policies at equal bytes");
  command->add_option("--policies", args->policies,
                      "Policies separated by ';' (KEYCODEC|VALUECODEC|sinks=N|window=N|block=N|layerL=K/V); "
                      "default: the standard comparison")
      ->check(NonEmptyList(';'));
  command->add_option("--synthetic", args->cases.synthetic, "Synthetic regime: default, sink, needle, peaked, long-tailed, flat");
  command->add_option("--synthetic-model", args->cases.model, kSyntheticModelHelp);
  command->add_option("--keys", args->cases.keys,
                      "Captured keys, [tokens, head_dim] (.npy, .safetensors[:NAME], .fvecs, .tsv[:ids])");
  command->add_option("--values", args->cases.values, "Captured values, [tokens, head_dim]");
  command->add_option("--queries", args->cases.queries, "Captured queries, [queries, head_dim]");
  command->add_option("--tokens", args->cases.tokens, "Tokens in the cache (captured: the first N)")->check(CLI::Range(10, 1 << 24));
  command->add_option("--dim", args->cases.dim, "Head dimension of the synthetic cache")->check(CLI::Range(8, 1024));
  command->add_option("--num-queries", args->cases.query_count, "Queries per synthetic regime")->check(CLI::Range(1, 4096));
  command->add_option("--seed", args->cases.seed, "Seed of data and codecs");
  command->add_option("--threads", args->threads, "Threads of the timed decode calls (default 1; 0 = all)")
      ->check(CLI::Range(0, kMaxThreads));
  command->add_option("--save-cache", args->save_cache,
                      "Save the cache built for the one policy and case to this file (kvsketch cache format)");
  command->add_option("--cache", args->cache,
                      "Evaluate a saved cache (from --save-cache or KVCache::save) against the tensors it was built from");
  command->add_flag("--json", args->json, "JSON rows instead of a table");
  return [command, args] {
    if (command->parsed()) run(*args);
  };
}

}  // namespace kvsketch::tools
