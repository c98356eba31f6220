// kvsketch bench decode: a model's prefill and decode speed per context and KV-cache policy, each
// policy's ratio to fp16 in the same run (decode_bench.hpp).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>

#include "commands.hpp"
#include "kvsketch/model/decode_bench.hpp"
#include "model_arguments.hpp"
#include "text_table.hpp"

namespace kvsketch::tools {

std::function<void()> add_decode_bench_command(CLI::App& bench) {
  struct Arguments {
    model::DecodeBenchConfig config;
    std::string contexts = "1k,4k,16k", policies = "fp16;q4_0;tq_mse:b=3|tq_mse:b=3";
    bool json = false;
  };
  auto args = std::make_shared<Arguments>();
  auto* command = bench.add_subcommand("decode", "A model's prefill and decode tokens/s per context and KV policy, "
                                                 "with each policy's ratio to fp16");
  command->add_option("--model", args->config.model_dir, "Hugging Face model folder")->required();
  command->add_option("--text", args->config.text_path, "text whose tokens (repeated) fill the context")->required();
  command->add_option("--contexts", args->contexts, "context lengths in tokens, k = 1024")->default_val("1k,4k,16k");
  command->add_option("--policies", args->policies, "';'-separated KV policies (include fp16 for the ratios)")
      ->default_val("fp16;q4_0;tq_mse:b=3|tq_mse:b=3");
  command->add_option("--decode-tokens", args->config.decode_tokens, "decode steps timed (median reported)")
      ->default_val(32)->check(CLI::Range(1, 100000));
  command->add_option("--chunk", args->config.chunk, "prefill chunk")->default_val(512)->check(CLI::Range(1, 1 << 20));
  command->add_option("--batch", args->config.batch, "sequences of the context decoded together, one token each a step")
      ->default_val(1)->check(CLI::Range(1, 4096));
  command->add_flag("--json", args->json, "print JSON");
  return [command, args] {
    if (!command->parsed()) return;
    args->config.contexts = parse_token_counts(args->contexts, "--contexts");
    args->config.policies = split_policies(args->policies);
    const auto report = model::run_decode_bench(args->config);
    if (args->json) {
      nlohmann::json rows = nlohmann::json::array();
      for (const auto& r : report.rows)
        rows.push_back({{"policy", r.policy},
                        {"context", r.context},
                        {"batch", r.batch},
                        {"prefill_tokens_per_second", r.prefill_tokens_per_second},
                        {"decode_tokens_per_second", r.decode_tokens_per_second},
                        {"prefill_ratio_to_fp16", r.prefill_ratio_to_fp16 > 0 ? nlohmann::json(r.prefill_ratio_to_fp16) : nlohmann::json()},
                        {"decode_ratio_to_fp16", r.decode_ratio_to_fp16 > 0 ? nlohmann::json(r.decode_ratio_to_fp16) : nlohmann::json()},
                        {"cache_bytes", r.cache_bytes},
                        {"bits_per_value", r.bits_per_value}});
      std::cout << nlohmann::json{{"threads", report.threads}, {"weight_bytes", report.weight_bytes}, {"rows", rows}}
                       .dump(2)
                << "\n";
      return;
    }
    TextTable table({"<policy", "context", "batch", "prefill tok/s", "decode tok/s", "decode vs fp16", "cache MiB",
                     "bits/value"});
    for (const auto& r : report.rows)
      table.add({r.policy, std::to_string(r.context), std::to_string(r.batch),
                 fmt::format("{:.0f}", r.prefill_tokens_per_second),
                 fmt::format("{:.1f}", r.decode_tokens_per_second),
                 r.decode_ratio_to_fp16 > 0 ? fmt::format("{:.2f}x", r.decode_ratio_to_fp16) : "-",
                 fmt::format("{:.2f}", r.cache_bytes / 1048576.0), fmt::format("{:.2f}", r.bits_per_value)});
    table.print(std::cout);
    fmt::print("{} threads, weights {:.1f} MiB (float32)\n", report.threads, report.weight_bytes / 1048576.0);
  };
}

}  // namespace kvsketch::tools
