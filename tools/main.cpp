// kvsketch: command-line front end of the library.
#include <fmt/format.h>

#include <iostream>
#include <new>

#include "commands.hpp"
#include "core/require.hpp"
#include "simd/kernels.hpp"

int main(int argc, char** argv) {
  CLI::App app{"kvsketch: randomized sketches for KV caches and vector search"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("kvsketch ") + KVSKETCH_VERSION);
  std::vector<std::function<void()>> actions = {
      kvsketch::tools::add_distortion_command(app),
      kvsketch::tools::add_codecs_command(app),
      kvsketch::tools::add_attention_command(app),
      kvsketch::tools::add_bench_command(app),
      kvsketch::tools::add_ann_command(app),
      kvsketch::tools::add_sparse_command(app),
      kvsketch::tools::add_perplexity_command(app),
      kvsketch::tools::add_retrieval_command(app),
      kvsketch::tools::add_generate_command(app),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Help and --version exit 0; every bad argument exits 2, as the commands' own errors do.
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    kvsketch::simd::select_target_from_environment();
    for (auto& action : actions) action();
  } catch (const kvsketch::Error& e) {
    std::cerr << "kvsketch: error: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "kvsketch: error: out of memory: the data this command asked for (tokens, dimensions, vectors, "
                 "layers) does not fit in this machine's memory\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "kvsketch: error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
