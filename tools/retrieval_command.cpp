// kvsketch retrieval: passkey, needles and MQAR accuracy of a model under KV-cache policies
// (retrieval_eval.hpp), per context length and depth.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <map>

#include "commands.hpp"
#include "core/require.hpp"
#include "kvsketch/model/retrieval_eval.hpp"
#include "model_arguments.hpp"
#include "text_table.hpp"

namespace kvsketch::tools {
namespace {

struct Arguments {
  model::RetrievalConfig config;
  std::string task = "passkey", contexts = "512,1024,2048", depths = "0,0.25,0.5,0.75,1", pairs = "16,32,64",
              policies;
  bool json = false;
};

void print(const model::RetrievalReport& r, bool json) {
  if (json) {
    nlohmann::json out = {{"task", r.task}, {"seconds", r.seconds}, {"policies", nlohmann::json::array()}};
    for (const auto& p : r.policies) {
      nlohmann::json cells = nlohmann::json::array();
      for (const auto& c : p.cells)
        cells.push_back({{"context", c.context},
                         {"depth", c.depth},
                         {"tokens", c.tokens},
                         {"correct", c.correct},
                         {"total", c.total},
                         {"accuracy", c.total ? double(c.correct) / c.total : 0.0}});
      out["policies"].push_back(
          {{"policy", p.policy}, {"bits_per_value", p.bits_per_value}, {"accuracy", p.accuracy}, {"cells", cells}});
    }
    std::cout << out.dump(2) << "\n";
    return;
  }
  for (const auto& p : r.policies) {
    fmt::print("{} ({}): {:.1f}% overall, {:.2f} bits per value at the longest prompt\n", p.policy, r.task,
               100 * p.accuracy, p.bits_per_value);
    std::vector<double> depths;
    for (const auto& c : p.cells)
      if (std::find(depths.begin(), depths.end(), c.depth) == depths.end()) depths.push_back(c.depth);
    std::vector<std::string> headers{r.task == "mqar" ? "pairs" : "tokens"};
    for (double d : depths) headers.push_back(r.task == "passkey" ? fmt::format("depth {:.2f}", d) : "accuracy");
    TextTable table(headers);
    std::map<size_t, std::vector<std::string>> rows;
    std::vector<size_t> order;
    for (const auto& c : p.cells) {
      if (!rows.count(c.context)) {
        rows[c.context] = {std::to_string(c.context)};
        order.push_back(c.context);
      }
      rows[c.context].push_back(fmt::format("{:.0f}% ({}/{})", c.total ? 100.0 * c.correct / c.total : 0.0, c.correct,
                                            c.total));
    }
    for (size_t context : order) table.add(rows[context]);
    table.print(std::cout);
    fmt::print("\n");
  }
  fmt::print("{:.1f} s\n", r.seconds);
}

}  // namespace

std::function<void()> add_retrieval_command(CLI::App& app) {
  auto args = std::make_shared<Arguments>();
  auto* command = app.add_subcommand("retrieval", "Long-context retrieval accuracy (passkey, needles, MQAR) of a model "
                                                  "under KV-cache policies");
  command->add_option("--model", args->config.model_dir, "Hugging Face model folder")->required();
  command->add_option("--text", args->config.text_path, "UTF-8 text the haystacks are cut from")->required();
  command->add_option("--task", args->task, "passkey | needles | mqar")->default_val("passkey");
  command->add_option("--policies", args->policies, "';'-separated KV policies; exact: float32 attention")->required();
  command->add_option("--contexts", args->contexts, "prompt lengths in tokens (passkey, needles), k = 1024")
      ->default_val("512,1024,2048");
  command->add_option("--depths", args->depths, "needle depths in [0, 1] (passkey)")->default_val("0,0.25,0.5,0.75,1");
  command->add_option("--pairs", args->pairs, "key-value pairs per prompt (mqar)")->default_val("16,32,64");
  command->add_option("--needles", args->config.needles, "needles per prompt (needles)")->default_val(4);
  command->add_option("--samples", args->config.samples, "prompts per cell")->default_val(10);
  command->add_option("--chunk", args->config.chunk, "prefill chunk in tokens")->default_val(256);
  command->add_option("--seed", args->config.seed, "seed of the prompts")->default_val(0);
  command->add_flag("--json", args->json, "print JSON");
  return [command, args] {
    if (!command->parsed()) return;
    auto& c = args->config;
    require(args->task == "passkey" || args->task == "needles" || args->task == "mqar",
            "--task: '{}' is not passkey, needles or mqar", args->task);
    c.task = args->task == "passkey" ? model::RetrievalTask::kPasskey
             : args->task == "needles" ? model::RetrievalTask::kNeedles
                                       : model::RetrievalTask::kMqar;
    c.contexts = parse_token_counts(args->contexts, "--contexts");
    c.depths = parse_fractions(args->depths, "--depths");
    c.pairs = parse_token_counts(args->pairs, "--pairs");
    c.policies = split_policies(args->policies);
    print(model::run_retrieval(c), args->json);
  };
}

}  // namespace kvsketch::tools
