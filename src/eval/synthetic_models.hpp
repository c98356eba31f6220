// The two ways the synthetic generator makes keys and values (see synthetic_cache.hpp); the
// queries are made from what each returns, by the same code for both.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "kvsketch/random.hpp"
#include "kvsketch/eval/synthetic_cache.hpp"

namespace kvsketch::synthetic {

constexpr size_t kSinkTokens = 4;

struct GeneratedCache {
  std::vector<double> key_center;      // needle queries aim at body keys minus this
  std::vector<double> sink_direction;  // unit; the sink keys hold sink_strength along it
  double sink_strength = 0.0;
  // A unit query direction for the regimes other than needle, drawn from `stream`.
  std::function<std::vector<double>(RandomStream& stream)> query_direction;
};

// Fill cache.keys and cache.values (cache.tokens x cache.dim).
GeneratedCache generate_independent(SyntheticCache& cache, uint64_t seed);
GeneratedCache generate_hidden_state(SyntheticCache& cache, uint64_t seed);

}  // namespace kvsketch::synthetic
