// The two papers' central claims, on the hidden-state synthetic cache (keys and values projections
// of one hidden state per token, keys in a cone; see src/eval/hidden_state_cache.cpp), with
// `kvsketch sparse`'s protocol: 4 exact sinks, 64 exact recent tokens, errors against exact attention.
// On the independent cache neither claim holds, and RESULTS.md says why.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <utility>

#include "kvsketch/eval/sparse_eval.hpp"
#include "kvsketch/eval/synthetic_cache.hpp"

using namespace kvsketch;

namespace {

AttentionCase hidden_state_case(const std::string& regime, size_t tokens, uint64_t seed) {
  SyntheticCache s = make_synthetic_cache(regime, tokens, 128, 16, seed, SyntheticModel::kHiddenState);
  return {regime, s.tokens, s.dim, s.queries, std::move(s.keys), std::move(s.values), std::move(s.query_rows)};
}

SparseEvalRow run_one(const std::string& spec, const AttentionCase& data, uint64_t seed) {
  SparseEvalConfig config;
  config.methods = {spec};
  config.seed = seed;
  return run_sparse_eval(data, config).at(0);
}

}  // namespace

// MagicPIG (specs/magicpig.md, claim 7): where attention has a long tail, sampling by LSH with
// importance weights beats oracle top-k at the same budget, because top-k drops the tail whose
// values differ from the head's. At the paper's three (K, L) settings, two caches each.
TEST(SparseClaims, MagicPigBeatsTopKOnLongTailedAndFlatAttention) {
  for (const std::string regime : {"long-tailed", "flat"})
    for (uint64_t seed : {1, 2}) {
      const AttentionCase data = hidden_state_case(regime, 8192, seed);
      for (const std::string setting : {"K=8,L=75", "K=9,L=120", "K=10,L=150"}) {
        const SparseEvalRow pig = run_one("magicpig:" + setting, data, seed);
        const SparseEvalRow topk = run_one(fmt::format("topk:budget={:.4f}", pig.budget), data, seed);
        SCOPED_TRACE(fmt::format("{} {} seed {}: budget {:.4f}", regime, setting, seed, pig.budget));
        EXPECT_GT(pig.budget, 0.005);
        EXPECT_LT(pig.budget, 0.08);
        EXPECT_LT(pig.rel_error, topk.rel_error);
      }
    }
}

// BalanceKV (specs/balancekv.md, claim 3): lower error than uniform sampling of as many tokens at
// compression 1/2 to 1/16, on every regime. Mean over six seeds (the paper: ten), each seed a new
// cache and a new selection, since one selection serves every query of a cache.
TEST(SparseClaims, BalanceKvBeatsUniformSamplingAtEveryCompression) {
  for (const std::string& regime : synthetic_regimes()) {
    std::map<std::string, double> balance, uniform;
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      const AttentionCase data = hidden_state_case(regime, 4096, seed);
      for (const std::string ratio : {"0.5", "0.25", "0.125", "0.0625"}) {
        const SparseEvalRow b = run_one("balancekv:ratio=" + ratio, data, seed);
        const SparseEvalRow u = run_one(fmt::format("uniform:budget={:.4f}", b.budget), data, seed);
        balance[ratio] += b.rel_error / 6;
        uniform[ratio] += u.rel_error / 6;
      }
    }
    for (const auto& [ratio, error] : balance) {
      fmt::print("{} 1/{}: balancekv {:.4f} uniform {:.4f}\n", regime, 1 / std::stod(ratio), error, uniform[ratio]);
      EXPECT_LT(error, uniform[ratio]) << regime << " at ratio " << ratio;
    }
  }
}

// The geometry RESULTS.md quotes for the two models: mean cos(k, c) and ||k - c||^2 / sqrt(d) over
// the body keys, c their mean (measured at 8,192 tokens: hidden-state 0.78 and 11, independent 0.17
// and 67; at 65,536 tokens RoPE has turned the hidden-state offset away: 0.10 and 21).
TEST(SparseClaims, HiddenStateKeysLieInACone) {
  auto geometry = [](SyntheticModel model, size_t n) {
    const size_t d = 128;
    const SyntheticCache s = make_synthetic_cache("long-tailed", n, d, 1, 1, model);
    std::vector<double> c(d, 0.0);
    for (size_t t = 4; t < n; ++t)
      for (size_t j = 0; j < d; ++j) c[j] += s.keys[t * d + j] / static_cast<double>(n - 4);
    double centre_norm = 0.0, cosine = 0.0, spread = 0.0;
    for (double x : c) centre_norm += x * x;
    for (size_t t = 4; t < n; ++t) {
      double distance = 0.0, norm = 0.0, dot = 0.0;
      for (size_t j = 0; j < d; ++j) {
        const double k = s.keys[t * d + j];
        distance += (k - c[j]) * (k - c[j]);
        norm += k * k;
        dot += k * c[j];
      }
      cosine += dot / std::sqrt(norm * centre_norm) / static_cast<double>(n - 4);
      spread += distance / std::sqrt(static_cast<double>(d)) / static_cast<double>(n - 4);
    }
    return std::pair{cosine, spread};
  };
  const auto [hidden_cosine, hidden_spread] = geometry(SyntheticModel::kHiddenState, 8192);
  const auto [independent_cosine, independent_spread] = geometry(SyntheticModel::kIndependent, 8192);
  EXPECT_NEAR(hidden_cosine, 0.78, 0.02);
  EXPECT_NEAR(hidden_spread, 11.0, 0.5);
  EXPECT_NEAR(independent_cosine, 0.17, 0.02);
  EXPECT_NEAR(independent_spread, 67.0, 1.0);
  const auto [long_cosine, long_spread] = geometry(SyntheticModel::kHiddenState, 65536);
  EXPECT_NEAR(long_cosine, 0.10, 0.02);
  EXPECT_NEAR(long_spread, 21.0, 1.0);
}
