// The papers' claim at equal bytes: TurboQuant against KIVI-style quantization, on every regime of
// the synthetic generator, as `kvsketch attention` measures it (docs/RESULTS.md has the tables).
// Every policy keeps the same 4 sinks and 128 + up to 127 window tokens in fp16 (block=128, which
// KIVI's 128-token key groups need), so the bytes differ only in the compressed body.
#include <gtest/gtest.h>

#include "kvsketch/eval/attention_eval.hpp"
#include "kvsketch/eval/synthetic_cache.hpp"

namespace kvsketch {
namespace {

struct Comparison {
  std::string turboquant, kivi;
};

std::vector<std::pair<AttentionEvalRow, AttentionEvalRow>> compare(const Comparison& c, size_t tokens, uint64_t seed) {
  std::vector<std::pair<AttentionEvalRow, AttentionEvalRow>> rows;
  for (const std::string regime : {"sink", "needle", "peaked", "long-tailed", "flat"}) {
    SyntheticCache s = make_synthetic_cache(regime, tokens, 128, 24, seed);
    const AttentionCase data{regime, s.tokens, s.dim, s.queries, s.keys, s.values, s.query_rows};
    rows.emplace_back(evaluate_policy(c.turboquant + "|block=128", data, seed, 0),
                      evaluate_policy(c.kivi + "|block=128", data, seed, 0));
  }
  return rows;
}

// Keys: TurboQuant_mse (the outlier split at k.5 bits); values: centred and rescaled TurboQuant_mse,
// unbiased, so that broad attention averages the quantization error away.
TEST(EqualBytes, TurboQuantBeatsKiviOnEveryRegimeAtTwoAndAHalfAndThreeAndAHalfBits) {
  const Comparison comparisons[] = {
      {"tq_mse:b=2.5|center:tq_mse:b=2.5,rescale=1", "kivi:b=2,group=64"},  // 2.5 bits each
      {"tq_mse:b=2.5|center:tq_mse:b=2.5,rescale=1", "kivi:b=2,group=32"},  // KIVI-2 as published: 3 bits
      {"tq_mse:b=3.5|center:tq_mse:b=3,rescale=1", "kivi:b=3,group=64"},    // 3.31 against 3.5 bits
  };
  for (uint64_t seed : {1, 2})
    for (const Comparison& c : comparisons)
      for (const auto& [tq, kivi] : compare(c, 3000, seed)) {
        SCOPED_TRACE(c.turboquant + " against " + c.kivi + " on " + tq.regime + ", seed " + std::to_string(seed));
        // Beyond the body, TurboQuant holds a fixed 384 bytes per head: the keys' and values' outlier
        // channel lists (2 x 64 bytes) and the values' fp16 mean (256 bytes).
        EXPECT_LE(tq.bytes, kivi.bytes + 384);
        EXPECT_LT(tq.rel_error, kivi.rel_error);
      }
}

// At 3 and 4 bits KIVI's keys, quantized per channel over 128 tokens, keep the peaked regime: its
// group ranges follow the slowly rotating RoPE pairs' offsets, which a rotation spreads over every
// coordinate. TurboQuant still wins where values dominate; the rest stays within the margins below.
TEST(EqualBytes, AtThreeAndFourBitsKiviKeysHoldThePeakedRegime) {
  const struct {
    Comparison comparison;
    double peaked_margin;
  } cases[] = {{{"tq_mse:b=3|center:tq_mse:b=3,rescale=1", "kivi:b=3,group=128"}, 1.2},   // 3.125 vs 3.25 bits
               {{"tq_mse:b=4|center:tq_mse:b=4,rescale=1", "kivi:b=4,group=128"}, 1.6}};  // 4.125 vs 4.25 bits
  for (const auto& c : cases)
    for (const auto& [tq, kivi] : compare(c.comparison, 3000, 1)) {
      SCOPED_TRACE(c.comparison.turboquant + " against " + c.comparison.kivi + " on " + tq.regime);
      EXPECT_LT(tq.bytes, kivi.bytes);
      if (tq.regime == "flat") {
        EXPECT_LT(tq.rel_error, kivi.rel_error);
      }
      EXPECT_LT(tq.rel_error, c.peaked_margin * kivi.rel_error);
    }
}

}  // namespace
}  // namespace kvsketch
