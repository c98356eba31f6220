#include <iostream>

#include "commands.hpp"
#include "kvsketch/codec.hpp"

namespace kvsketch::tools {

std::function<void()> add_codecs_command(CLI::App& app) {
  auto* command = app.add_subcommand("codecs", "List codec spec strings and their parameters");
  return [command] {
    if (command->parsed()) std::cout << codec_spec_help() << "\n";
  };
}

}  // namespace kvsketch::tools
