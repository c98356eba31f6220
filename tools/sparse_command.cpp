// kvsketch sparse: attention from selected, weighted token subsets (MagicPIG, BalanceKV and baselines)
// against exact attention, on the synthetic generator or captured tensors.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>

#include "attention_cases.hpp"
#include "commands.hpp"
#include "kvsketch/sparse_attention.hpp"
#include "kvsketch/eval/sparse_eval.hpp"
#include "list_options.hpp"
#include "progress.hpp"
#include "text_table.hpp"

namespace kvsketch::tools {

std::function<void()> add_sparse_command(CLI::App& app) {
  auto args = std::make_shared<CaseArguments>();
  auto methods = std::make_shared<std::string>();
  auto config = std::make_shared<SparseEvalConfig>();
  auto json = std::make_shared<bool>(false);
  args->synthetic.clear();
  auto* command = app.add_subcommand(
      "sparse", "Sampling and selection attention (MagicPIG, BalanceKV, top-k, uniform) vs exact");
  command->add_option("--methods", *methods,
                      "Selectors separated by ';' (magicpig:K=10,L=150[,hits=2,center=1,cap=F]; "
                      "balancekv:ratio=1/2^k[,block=256,gain=G,temp=T,mode=joint|paper|prefill]; topk:budget=F; "
                      "uniform:budget=F; oracle:budget=F; window; exact); default: the standard comparison")
      ->check(NonEmptyList(';'));
  command->add_option("--synthetic", args->synthetic, "Synthetic regime: default, sink, needle, peaked, long-tailed, flat");
  command->add_option("--synthetic-model", args->model, kSyntheticModelHelp);
  command->add_option("--keys", args->keys, "Captured keys, [tokens, head_dim]");
  command->add_option("--values", args->values, "Captured values, [tokens, head_dim]");
  command->add_option("--queries", args->queries, "Captured queries, [queries, head_dim]");
  command->add_option("--tokens", args->tokens, "Tokens in the cache")->check(CLI::Range(100, 1 << 24));
  command->add_option("--dim", args->dim, "Head dimension of the synthetic cache")->check(CLI::Range(8, 1024));
  command->add_option("--num-queries", args->query_count, "Queries per regime")->check(CLI::Range(1, 4096));
  command->add_option("--body", config->body,
                      "How the body's K and V are stored: exact floats (default) or codec specs KEY|VALUE read "
                      "straight from the codes, e.g. 'tq_prod:b=3|tq_mse:b=3'");
  command->add_option("--sinks", config->sinks, "Exact first tokens (default 4)");
  command->add_option("--window", config->window, "Exact recent tokens (default 64)");
  command->add_option("--seed", args->seed, "Seed of data and selectors");
  command->add_flag("--json", *json, "JSON rows instead of a table");
  return [=] {
    if (!command->parsed()) return;
    config->methods = split_list(*methods, ';');
    config->seed = args->seed;
    // The data and every method checked before any output or work.
    const std::vector<AttentionCase> cases = load_attention_cases(*args);
    for (const std::string& method : config->methods)
      if (!cases.empty()) make_selector(method, cases.front().dim, config->seed);
    nlohmann::json out = nlohmann::json::array();
    TextTable table(
        {"<method", "<regime", "budget", "index B/tok", "index/kv", "rel_error", "lse_error", "kl", "<body"});
    Progress progress(!*json, cases.size());
    for (const AttentionCase& data : cases) {
      progress.step(data.name);
      for (const SparseEvalRow& r : run_sparse_eval(data, *config)) {
        const size_t body = data.tokens - config->sinks - config->window;
        // The index against the cache it indexes (MagicPIG's tables can outweigh it at d = 64).
        const double index_over_kv = r.kv_bytes ? static_cast<double>(r.index_bytes) / r.kv_bytes : 0.0;
        if (*json) {
          out.push_back({{"method", r.method}, {"regime", r.regime}, {"body", r.body}, {"budget", r.budget},
                         {"index_bytes", r.index_bytes}, {"kv_bytes", r.kv_bytes}, {"body_tokens", body}, {"rel_error", r.rel_error},
                         {"index_over_kv", index_over_kv}, {"lse_error", r.lse_error}, {"kl", r.kl}});
        } else {
          table.add({r.method, r.regime, fmt::format("{:.4f}", r.budget),
                     fmt::format("{:.1f}", static_cast<double>(r.index_bytes) / body),
                     fmt::format("{:.2f}", index_over_kv), fmt::format("{:.4f}", r.rel_error),
                     fmt::format("{:.4f}", r.lse_error), fmt::format("{:.4f}", r.kl), r.body});
        }
      }
    }
    if (*json)
      std::cout << out.dump(2) << "\n";
    else
      table.print(std::cout);
  };
}

}  // namespace kvsketch::tools
