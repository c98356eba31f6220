// Subcommands of the kvsketch tool; each registers itself on the CLI11 app and runs when chosen.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace kvsketch::tools {

// Returns the action to run if the subcommand was selected.
std::function<void()> add_distortion_command(CLI::App& app);
std::function<void()> add_codecs_command(CLI::App& app);
std::function<void()> add_attention_command(CLI::App& app);
std::function<void()> add_bench_command(CLI::App& app);
std::function<void()> add_ann_command(CLI::App& app);
std::function<void()> add_sparse_command(CLI::App& app);
std::function<void()> add_perplexity_command(CLI::App& app);
std::function<void()> add_retrieval_command(CLI::App& app);
std::function<void()> add_generate_command(CLI::App& app);
// `bench decode`, registered under the bench command.
std::function<void()> add_decode_bench_command(CLI::App& bench);

}  // namespace kvsketch::tools
