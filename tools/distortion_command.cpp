// kvsketch distortion: the TurboQuant paper's distortion table (section 2.1) for any codec.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <sstream>

#include "commands.hpp"
#include "json_values.hpp"
#include "kvsketch/eval/distortion.hpp"
#include "core/require.hpp"

namespace kvsketch::tools {
namespace {

struct Arguments {
  DistortionConfig config;
  std::string bits = "1,2,3,4";
  std::string codecs = "tq_mse,tq_prod";
  bool json = false;
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ','))
    if (!item.empty()) items.push_back(item);
  return items;
}

void run(Arguments& args) {
  for (const std::string& b : split(args.bits)) {
    size_t used = 0;
    int value = -1;
    try {
      value = std::stoi(b, &used);
    } catch (const std::exception&) {
    }
    require(used == b.size() && value >= 1 && value <= 8, "--bits: '{}' is not an integer in 1..8", b);
    args.config.bits.push_back(value);
  }
  args.config.codecs = split(args.codecs);
  const auto rows = run_distortion(args.config);
  if (args.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows)
      out.push_back({{"codec", r.codec},
                     {"bits", r.bits},
                     {"dim", r.dim},
                     {"mse", r.mse},
                     {"ip_bias", r.ip_bias},
                     {"ip_bias_stderr", r.ip_bias_stderr},
                     {"ip_bias_factor", r.ip_bias_factor},
                     {"ip_var_d", r.ip_var_d},
                     {"mse_lower_bound", optional_json(r.mse_lower_bound)},
                     {"mse_upper_bound", optional_json(r.mse_upper_bound)},
                     {"ip_var_d_upper_bound", optional_json(r.ip_var_d_upper_bound)}});
    std::cout << out.dump(2) << "\n";
    return;
  }
  const auto bound = [](const std::optional<double>& b) { return b ? fmt::format("{:.5f}", *b) : std::string("-"); };
  fmt::print("{:<8} {:>4} {:>5} {:>6} {:>9} {:>19} {:>8} {:>8} {:>9} {:>9} {:>9}\n", "codec", "bits", "dim", "bytes",
             "mse", "ip_bias (se)", "factor", "ip_var_d", "mse >=", "mse <=", "var_d <=");
  for (const auto& r : rows)
    fmt::print("{:<8} {:>4} {:>5} {:>6} {:>9.6f} {:>19} {:>8.4f} {:>8.4f} {:>9} {:>9} {:>9}\n", r.codec, r.bits, r.dim,
               r.code_bytes, r.mse, fmt::format("{:+.5f} ({:.5f})", r.ip_bias, r.ip_bias_stderr), r.ip_bias_factor,
               r.ip_var_d, bound(r.mse_lower_bound), bound(r.mse_upper_bound), bound(r.ip_var_d_upper_bound));
  fmt::print("bounds where a theorem holds for these rows: mse >= 4^-b for inputs uniform on the sphere (random); "
             "mse <= Theorem 1 (tq_mse); var_d <= Theorem 2 (tq_prod)\n");
}

}  // namespace

std::function<void()> add_distortion_command(CLI::App& app) {
  auto args = std::make_shared<Arguments>();
  args->config.bits.clear();
  auto* command = app.add_subcommand("distortion", "MSE and inner-product distortion per codec and bit width "
                                                   "(TurboQuant section 2.1)");
  command->add_option("--dim", args->config.dim, "dimension (random/e1/sparse inputs; files give their own)")
      ->default_val(1536);
  command->add_option("--bits", args->bits, "comma-separated bit widths, 1..8")->default_val("1,2,3,4");
  command->add_option("--codecs", args->codecs, "comma-separated: tq_mse, tq_prod, qjl (m = bits x dim)")
      ->default_val("tq_mse,tq_prod");
  command->add_option("--options", args->config.options, "extra spec parameters, e.g. rotation=haar,rounds=3");
  command->add_option("--vectors", args->config.vectors, "base vectors")->default_val(1000);
  command->add_option("--queries", args->config.queries, "query directions")->default_val(64);
  command->add_option("--seed", args->config.seed, "random seed")->default_val(1);
  command->add_option("--codec-seeds", args->config.codec_seeds,
                      "average over this many codec seeds (rotations); real data needs several")
      ->default_val(1);
  command->add_option("--input", args->config.input, "random | e1 | sparse | FILE (.tsv, .fvecs, .npy)")
      ->default_val("random");
  command->add_flag("--json", args->json, "print a JSON array");
  return [command, args] {
    if (!command->parsed()) return;
    // Files carry their own dimension; --dim is only checked against it when given explicitly.
    if (command->count("--dim") == 0 && args->config.input != "random" && args->config.input != "e1" &&
        args->config.input != "sparse")
      args->config.dim = 0;
    run(*args);
  };
}

}  // namespace kvsketch::tools
