// kvsketch bench attention | append: decode-attention and append speed of cache policies, with the
// machine's memory read bandwidth measured in the same run (see include/kvsketch/eval/attention_bench.hpp).
#include <fmt/format.h>
#include <omp.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>
#include <string>

#include "commands.hpp"
#include "json_values.hpp"
#include "kvsketch/eval/attention_bench.hpp"
#include "core/require.hpp"
#include "kvsketch/eval/paged_bench.hpp"
#include "kvsketch/eval/sparse_bench.hpp"
#include "list_options.hpp"
#include "text_table.hpp"
#include "simd/kernels.hpp"

namespace kvsketch::tools {
namespace {

std::vector<std::string> default_bench_policies() {
  return {"fp16",       "int8",       "q4_0",       "kivi:b=2,group=32", "tq_mse:b=4", "tq_prod:b=3|tq_mse:b=3",
          "tq_mse:b=3", "tq_mse:b=2"};
}

struct BenchArguments {
  std::string policies, tokens = "4096,16384,65536,131072", threads, contexts = "4096";
  size_t dim = 128, heads = 4, kv_heads = 1, layers = 0, batch = 0;
  int repetitions = 5;
  bool json = false;
};

// --batch B: a PagedKVCache's batched decode against single-sequence calls (paged_bench.hpp).
void run_batched_attention(const BenchArguments& args, const std::vector<int>& threads) {
  PagedBenchConfig config;
  config.policies = split_list(args.policies, ';');
  if (config.policies.empty()) config.policies = default_bench_policies();
  config.batch = args.batch;
  config.threads = threads;
  config.head_dim = args.dim;
  config.query_heads = args.heads;
  config.kv_heads = args.kv_heads;
  config.repetitions = args.repetitions;
  config.layers = args.layers;
  const std::vector<size_t> contexts = parse_sizes(args.contexts, "--contexts");
  std::vector<PagedBenchRow> rows;
  // One sequence: a run per context. A batch: the contexts cycled over its sequences.
  for (size_t c = 0; c < (args.batch == 1 ? contexts.size() : 1); ++c) {
    config.contexts = args.batch == 1 ? std::vector<size_t>{contexts[c]} : contexts;
    for (const PagedBenchRow& row : bench_paged_attention(config)) rows.push_back(row);
  }
  if (args.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows)
      out.push_back({{"policy", r.policy}, {"batch", r.batch}, {"tokens", r.tokens}, {"threads", r.threads},
                     {"layers", r.layers}, {"bytes", r.bytes}, {"query_heads", args.heads},
                     {"kv_heads", args.kv_heads}, {"head_dim", args.dim}, {"batch_ns", r.batch_ns},
                     {"single_ns", r.single_ns}, {"batch_speedup", r.batch_speedup},
                     {"kv_cache_ns", measured_ratio(r.kv_cache_ns)},
                     {"paged_vs_kv_cache", measured_ratio(r.paged_vs_kv_cache)}, {"fork_ns", r.fork_ns},
                     {"append_ns", r.append_ns}, {"fork_fraction_of_append", r.fork_ns / r.append_ns},
                     {"target", simd::active_target()}});
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format("target {}; batches of {} sequences ({} tokens), {} KV head{} of {} query heads, "
                           "head_dim {}\n",
                           simd::active_target(), args.batch, args.contexts, args.kv_heads,
                           args.kv_heads == 1 ? "" : "s", args.heads, args.dim);
  TextTable table({"<policy", "tokens", "thr", "bytes", "batch us", "singles us", "batch gain", "vs KVCache",
                   "fork/append"});
  for (const auto& r : rows)
    table.add({r.policy, std::to_string(r.tokens), std::to_string(r.threads), std::to_string(r.bytes),
               fmt::format("{:.1f}", r.batch_ns / 1000.0), fmt::format("{:.1f}", r.single_ns / 1000.0),
               fmt::format("{:.2f}x", r.batch_speedup),
               r.paged_vs_kv_cache > 0 ? fmt::format("{:.3f}x", r.paged_vs_kv_cache) : std::string("-"),
               fmt::format("{:.3f}%", 100.0 * r.fork_ns / r.append_ns)});
  table.print(std::cout);
}

void run_attention(const BenchArguments& args) {
  AttentionBenchConfig config;
  config.policies = split_list(args.policies, ';');
  if (config.policies.empty()) config.policies = default_bench_policies();
  config.tokens = parse_sizes(args.tokens, "--tokens");
  const std::string threads = args.threads.empty() ? fmt::format("1,{}", omp_get_max_threads()) : args.threads;
  for (size_t t : parse_sizes(threads, "--threads"))
    if (std::find(config.threads.begin(), config.threads.end(), static_cast<int>(t)) == config.threads.end())
      config.threads.push_back(static_cast<int>(t));
  if (args.batch > 0) return run_batched_attention(args, config.threads);
  config.head_dim = args.dim;
  config.query_heads = args.heads;
  config.kv_heads = args.kv_heads;
  config.repetitions = args.repetitions;
  config.layers = args.layers;
  const auto rows = bench_attention(config);
  if (args.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows)
      out.push_back({{"policy", r.policy}, {"tokens", r.tokens}, {"threads", r.threads},
                     {"bits_per_value", r.bits_per_value}, {"bytes", r.bytes}, {"layers", r.layers},
                     {"query_heads", args.heads}, {"kv_heads", args.kv_heads}, {"head_dim", args.dim},
                     {"ns_per_query", r.ns_per_query},
                     {"gbytes_per_s", r.gbytes_per_s}, {"speedup_vs_fp16", measured_ratio(r.speedup_vs_fp16)},
                     {"memory_gbytes_per_s", r.memory_gbytes_per_s}, {"bandwidth_fraction", r.bandwidth_fraction},
                     {"huge_page_bytes", r.huge_page_bytes}, {"rows", r.rows}, {"target", simd::active_target()},
                     {"spread", r.spread}, {"unstable", r.unstable}, {"peak_memory_bytes", r.peak_memory_bytes}});
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format("target {}; {} KV head{} of {} query heads each, head_dim {}\n", simd::active_target(),
                           args.kv_heads, args.kv_heads == 1 ? "" : "s", args.heads, args.dim);
  const size_t huge = rows.empty() ? 0 : std::max_element(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
                                           return a.huge_page_bytes < b.huge_page_bytes;
                                         })->huge_page_bytes;
  std::cout << (huge == 0 ? std::string("pages: 4 KiB (no transparent huge pages in use)\n")
                          : fmt::format("pages: {} MiB on transparent huge pages\n", huge >> 20));
  TextTable table({"<policy", "tokens", "thr", "bits", "bytes", "us/step", "GB/s", "of mem", "vs fp16", "spread",
                    "<rows"});
  size_t unstable = 0;
  for (const auto& r : rows) {
    unstable += r.unstable;
    table.add({r.policy, std::to_string(r.tokens), std::to_string(r.threads), fmt::format("{:.2f}", r.bits_per_value),
               std::to_string(r.bytes), fmt::format("{:.1f}", r.ns_per_query / 1000.0),
               fmt::format("{:.1f}", r.gbytes_per_s), fmt::format("{:.0f}%", 100.0 * r.bandwidth_fraction),
               fmt::format("{:.2f}x", r.speedup_vs_fp16), fmt::format("{:.0f}%{}", 100.0 * r.spread, r.unstable ? "!" : ""),
               r.rows});
  }
  table.print(std::cout);
  std::cout << fmt::format("peak memory {} MiB", rows.empty() ? 0 : rows.back().peak_memory_bytes >> 20);
  if (unstable > 0)
    std::cout << fmt::format("; {} row{} unstable (!: passes spread over {:.0f}%, or faster than the probe's bandwidth): "
                             "rerun on a quiet machine",
                             unstable, unstable == 1 ? "" : "s", 100.0 * kUnstableSpread);
  std::cout << "\n";
}

void run_append(const BenchArguments& args) {
  std::vector<std::string> policies = split_list(args.policies, ';');
  if (policies.empty()) policies = default_bench_policies();
  const auto sizes = parse_sizes(args.tokens, "--tokens");
  const auto rows = bench_append(policies, sizes.empty() ? 65536 : sizes.front(), args.dim, 1);
  if (args.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows)
      out.push_back({{"policy", r.policy}, {"tokens", r.tokens}, {"head_dim", args.dim},
                     {"prefill_tokens_per_s", r.prefill_tokens_per_s}, {"decode_tokens_per_s", r.decode_tokens_per_s},
                     {"paged_prefill_tokens_per_s", r.paged_prefill_tokens_per_s},
                     {"paged_decode_tokens_per_s", r.paged_decode_tokens_per_s},
                     {"copy_tokens_per_s", r.copy_tokens_per_s}, {"target", simd::active_target()}});
    std::cout << out.dump(2) << "\n";
    return;
  }
  TextTable table({"<policy", "tokens", "prefill tok/s", "decode tok/s", "paged prefill", "paged decode",
                   "memcpy tok/s"});
  for (const auto& r : rows)
    table.add({r.policy, std::to_string(r.tokens), fmt::format("{:.0f}", r.prefill_tokens_per_s),
               fmt::format("{:.0f}", r.decode_tokens_per_s), fmt::format("{:.0f}", r.paged_prefill_tokens_per_s),
               fmt::format("{:.0f}", r.paged_decode_tokens_per_s), fmt::format("{:.0f}", r.copy_tokens_per_s)});
  table.print(std::cout);
}

void run_sparse(const BenchArguments& args) {
  SparseBenchConfig config;
  config.methods = split_list(args.policies, ';');
  const auto sizes = parse_sizes(args.tokens, "--tokens");
  require(sizes.size() == 1, "bench sparse: --tokens takes one context length");
  config.tokens = sizes.front();
  config.head_dim = args.dim;
  config.repetitions = args.repetitions;
  const auto rows = bench_sparse(config);
  if (args.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows)
      out.push_back({{"method", r.method}, {"tokens", r.tokens}, {"head_dim", args.dim}, {"threads", 1},
                     {"layers", r.layers}, {"budget", r.budget}, {"index_bytes_per_token", r.index_bytes_per_token},
                     {"ns_per_query", r.ns_per_query}, {"fp16_ns_per_query", r.fp16_ns_per_query},
                     {"fraction_of_fp16", r.fraction_of_fp16}, {"prefill_tokens_per_s", r.prefill_tokens_per_s},
                     {"insert_us_per_token", r.insert_us_per_token}, {"target", simd::active_target()}});
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format("target {}; one query head, head_dim {}, one thread; fp16 dense {:.1f} us/step\n",
                           simd::active_target(), args.dim, rows.empty() ? 0.0 : rows[0].fp16_ns_per_query / 1000);
  TextTable table({"<method", "tokens", "budget", "idx B/tok", "us/step", "of fp16", "prefill t/s", "insert us"});
  for (const auto& r : rows)
    table.add({r.method, std::to_string(r.tokens), fmt::format("{:.4f}", r.budget),
               fmt::format("{:.1f}", r.index_bytes_per_token), fmt::format("{:.1f}", r.ns_per_query / 1000.0),
               fmt::format("{:.1f}%", 100.0 * r.fraction_of_fp16), fmt::format("{:.0f}", r.prefill_tokens_per_s),
               fmt::format("{:.2f}", r.insert_us_per_token)});
  table.print(std::cout);
}

void add_common(CLI::App* command, BenchArguments& args) {
  command->add_option("--policies", args.policies, "Policies separated by ';' (default: a standard list)")
      ->check(NonEmptyList(';'));
  command->add_option("--dim", args.dim, "Head dimension")->check(CLI::Range(8, 1024));
  command->add_flag("--json", args.json, "JSON rows instead of a table");
}

}  // namespace

std::function<void()> add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArguments>();
  auto* bench = app.add_subcommand("bench", "Speed benchmarks (JSON with --json)");
  bench->require_subcommand(1);
  auto* attention = bench->add_subcommand(
      "attention", "Decode attention of one GQA group per policy, tokens and threads, with memory bandwidth");
  add_common(attention, *args);
  attention->add_option("--tokens", args->tokens, "Context lengths, comma separated");
  attention->add_option("--threads", args->threads, "Thread counts, comma separated (default: 1 and all)");
  attention->add_option("--heads", args->heads, "Query heads per KV head (a GQA group)")->check(CLI::Range(1, 64));
  attention->add_option("--kv-heads", args->kv_heads, "KV heads of the layer (default 1: one GQA group)")
      ->check(CLI::Range(1, 64));
  attention->add_option("--layers", args->layers,
                         "Copies of the cache queried in turn (default: enough to be twice the last-level cache, at most 256 MiB; "
                         "1 measures a cache-resident head)");
  attention->add_option("--batch", args->batch,
                        "Sequences decoded in one call of a paged cache, against as many single calls (with 1: "
                        "against KVCache's step, one run per context)")
      ->check(CLI::Range(1, 4096));
  attention->add_option("--contexts", args->contexts, "With --batch: the sequences' tokens, comma separated, cycled")
      ->default_val("4096");
  attention->add_option("--repetitions", args->repetitions, "Timed passes (the median is reported)")
      ->check(CLI::Range(1, 1000));
  auto* append = bench->add_subcommand("append", "Append speed per KV head and core: prefill block and token by token");
  add_common(append, *args);
  append->add_option("--tokens", args->tokens, "Tokens appended")->default_val("65536");
  auto* sparse = bench->add_subcommand(
      "sparse", "Sampling attention (MagicPIG, BalanceKV) against dense fp16 at one context length, one thread, "
                "with insertion and prefill rates");
  sparse->add_option("--methods", args->policies, "Selector specs separated by ';' (default: a standard list)")
      ->check(NonEmptyList(';'));
  sparse->add_option("--dim", args->dim, "Head dimension")->check(CLI::Range(8, 1024));
  sparse->add_flag("--json", args->json, "JSON rows instead of a table");
  sparse->add_option("--tokens", args->tokens, "Context length")->default_val("65536");
  sparse->add_option("--repetitions", args->repetitions, "Timed passes (the median is reported)")
      ->check(CLI::Range(1, 1000));
  auto decode = add_decode_bench_command(*bench);
  return [attention, append, sparse, decode, args] {
    decode();
    if (attention->parsed()) run_attention(*args);
    if (append->parsed()) run_append(*args);
    if (sparse->parsed()) run_sparse(*args);
  };
}

}  // namespace kvsketch::tools
