// kvsketch perplexity: a model's quality under each KV-cache policy against the fp16 cache, with
// llama.cpp's --kl-divergence statistics (quality_eval.hpp).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>

#include "commands.hpp"
#include "kvsketch/model/quality_eval.hpp"
#include "model_arguments.hpp"
#include "text_table.hpp"

namespace kvsketch::tools {
namespace {

nlohmann::json statistics_json(const model::QualityStatistics& s) {
  return {{"tokens", s.tokens},
          {"ppl", s.ppl},
          {"ppl_stderr", s.ppl_stderr},
          {"ln_ppl_ratio", s.ln_ppl_ratio},
          {"ln_ppl_ratio_stderr", s.ln_ppl_ratio_stderr},
          {"ppl_ratio", std::exp(s.ln_ppl_ratio)},
          {"kld_mean", s.kld_mean},
          {"kld_stderr", s.kld_stderr},
          {"kld_median", s.kld_median},
          {"kld_p90", s.kld_p90},
          {"kld_p95", s.kld_p95},
          {"kld_p99", s.kld_p99},
          {"kld_p99_9", s.kld_p999},
          {"kld_max", s.kld_max},
          {"top1_agreement", s.top1_agreement},
          {"top1_stderr", s.top1_stderr},
          {"rms_delta_p", s.rms_delta_p},
          {"rms_delta_p_stderr", s.rms_delta_p_stderr},
          {"kld_by_depth", s.kld_by_depth}};
}

void print(const model::PerplexityReport& r, const std::string& reference, bool json) {
  if (json) {
    nlohmann::json out = {{"model", r.model_dir},
                          {"text", r.text_path},
                          {"context", r.context},
                          {"windows", r.windows},
                          {"scoring", r.score_decode ? "decode" : "prefill"},
                          {"text_tokens", r.text_tokens},
                          {"scored_tokens", r.scored_tokens},
                          {"reference", reference},
                          {"reference_ppl", r.reference_ppl},
                          {"reference_ppl_stderr", r.reference_ppl_stderr},
                          {"reference_bits_per_value", r.reference_bits_per_value},
                          {"depth_bands", r.depth_bands},
                          {"seconds", r.seconds},
                          {"policies", nlohmann::json::array()}};
    for (const auto& p : r.policies) {
      nlohmann::json row = statistics_json(p.pooled);
      row["policy"] = p.policy;
      row["randomized"] = p.randomized;
      row["seeds"] = p.seeds;
      row["bits_per_value"] = p.bits_per_value;
      row["kld_mean_per_seed"] = p.kld_mean_per_seed;
      row["ppl_per_seed"] = p.ppl_per_seed;
      out["policies"].push_back(row);
    }
    std::cout << out.dump(2) << "\n";
    return;
  }
  fmt::print("model {}, text {}: {} windows of {} tokens, {} tokens scored per policy and seed ({})\n", r.model_dir,
             r.text_path, r.windows, r.context, r.scored_tokens,
             r.score_decode ? "decode steps" : "prefilled in chunks");
  fmt::print("reference {}: PPL {:.4f} ± {:.4f}, {:.2f} bits per value\n\n", reference, r.reference_ppl,
             r.reference_ppl_stderr, r.reference_bits_per_value);
  TextTable table({"<policy", "bits/value", "seeds", "PPL", "ln(PPL/ref)", "KLD mean", "KLD p99", "KLD max",
                   "top-1 same", "RMS dp", "KLD by seed"});
  for (const auto& p : r.policies) {
    const auto& s = p.pooled;
    std::string spread = "-";
    if (p.kld_mean_per_seed.size() > 1) {
      const auto [lo, hi] = std::minmax_element(p.kld_mean_per_seed.begin(), p.kld_mean_per_seed.end());
      spread = fmt::format("{:.5f}..{:.5f}", *lo, *hi);
    }
    table.add({p.policy, fmt::format("{:.2f}", p.bits_per_value), std::to_string(p.seeds),
               fmt::format("{:.4f}", s.ppl), fmt::format("{:+.5f} ± {:.5f}", s.ln_ppl_ratio, s.ln_ppl_ratio_stderr),
               fmt::format("{:.5f} ± {:.5f}", s.kld_mean, s.kld_stderr), fmt::format("{:.4f}", s.kld_p99),
               fmt::format("{:.3f}", s.kld_max),
               fmt::format("{:.2f} ± {:.2f}%", 100 * s.top1_agreement, 100 * s.top1_stderr),
               fmt::format("{:.3f}%", 100 * s.rms_delta_p), spread});
  }
  table.print(std::cout);
  fmt::print("\nKLD by position in the window (mean):\n");
  std::vector<std::string> headers{"<policy"};
  for (const auto& [from, to] : r.depth_bands) headers.push_back(fmt::format("{}-{}", from, to));
  TextTable depth(headers);
  for (const auto& p : r.policies) {
    std::vector<std::string> row{p.policy};
    for (double k : p.pooled.kld_by_depth) row.push_back(fmt::format("{:.5f}", k));
    depth.add(row);
  }
  depth.print(std::cout);
  fmt::print("\n{:.1f} s\n", r.seconds);
}

}  // namespace

std::function<void()> add_perplexity_command(CLI::App& app) {
  auto config = std::make_shared<model::PerplexityConfig>();
  auto policies = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto* command = app.add_subcommand(
      "perplexity", "Perplexity, KL divergence and top-1 agreement of a model under KV-cache policies, against the "
                    "fp16 cache (llama.cpp's --kl-divergence statistics)");
  command->add_option("--model", config->model_dir, "Hugging Face model folder (config.json, safetensors, "
                                                    "tokenizer.json)")
      ->required();
  command->add_option("--text", config->text_path, "UTF-8 text file")->required();
  command->add_option("--policies", *policies,
                      "';'-separated KV policies (kv_policy.hpp), e.g. \"q4_0;tq_mse:b=3|tq_mse:b=3\"; exact: "
                      "float32 attention")
      ->required();
  command->add_option("--reference", config->reference, "the policy compared against")->default_val("fp16");
  command->add_option("--context", config->context, "tokens per window (0: min(model maximum, 1024))")
      ->default_val(0);
  command->add_option("--chunk", config->chunk, "prefill chunk in tokens")->default_val(256);
  auto scoring = std::make_shared<std::string>("decode");
  command->add_option("--scoring", *scoring, "decode: the scored half decoded token by token after the first half is "
                                             "prefilled; prefill: the whole window prefilled in chunks (llama.cpp)")
      ->check(CLI::IsMember({"decode", "prefill"}))
      ->default_val("decode");
  command->add_option("--windows", config->windows, "windows to score (0: the whole text)")->default_val(0);
  command->add_option("--seeds", config->seeds, "codec seeds of randomized policies")->default_val(3);
  command->add_option("--depth-bands", config->depth_buckets, "bands of positions for KLD by depth")->default_val(4);
  command->add_flag("--json", *json, "print JSON");
  return [command, config, policies, json, scoring] {
    if (!command->parsed()) return;
    config->score_decode = *scoring == "decode";
    config->policies = split_policies(*policies);
    print(model::run_perplexity(*config), config->reference, *json);
  };
}

}  // namespace kvsketch::tools
