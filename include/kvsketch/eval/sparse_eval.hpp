// `kvsketch sparse`: attention from a selected, weighted subset of the body (MagicPIG, top-k,
// sampling baselines) against exact attention. The first `sinks` and last `window` tokens are
// exact, as in the papers (MagicPIG: 4 sinks, 64 recent tokens); selectors index the body between.
#pragma once
#include <string>
#include <vector>

#include "kvsketch/eval/attention_eval.hpp"

namespace kvsketch {

struct SparseEvalConfig {
  std::vector<std::string> methods;  // selector specs; empty: the standard comparison
  size_t sinks = 4, window = 64;
  uint64_t seed = 1;
  // How the body's K and V are stored: empty for exact floats, or codec specs "KEY|VALUE" (one spec
  // for both) whose codes the selection attention reads directly (e.g. tq_prod:b=3|tq_mse:b=3).
  // Selectors index the original keys either way.
  std::string body;
};

struct SparseEvalRow {
  std::string method, regime;
  std::string body;         // the body's storage: "float" or the codec specs KEY|VALUE
  double budget = 0;        // mean fraction of body tokens whose K/V are read per query
  size_t index_bytes = 0;   // the selector's index over the body
  size_t kv_bytes = 0;      // K and V of the body it indexes: fp16, or the codes with their calibration
  double rel_error = 0;     // mean ||out - exact|| / ||exact||
  double lse_error = 0;     // mean |lse - exact lse|
  double kl = 0;            // mean KL(approximate || exact) over the tokens the method weights
};

// The standard list: MagicPIG at (8, 75), (9, 120), (10, 150), with oracle top-k and uniform
// sampling at the budget each setting read on the same case; BalanceKV at 1/2, 1/4, 1/8, 1/16, with
// uniform sampling at the budget each read (lower levels still hold up to a block each); sink +
// window alone.
std::vector<SparseEvalRow> run_sparse_eval(const AttentionCase& data, const SparseEvalConfig& config);

}  // namespace kvsketch
