#include "kvsketch/eval/synthetic_cache.hpp"

#include <algorithm>

#include "core/require.hpp"
#include "kvsketch/random.hpp"
#include "portable_math.hpp"
#include "synthetic_models.hpp"

namespace kvsketch {
namespace {

using synthetic::kSinkTokens;
constexpr size_t kNeedles = 3;

double logit_spread(const std::vector<double>& q, const std::vector<float>& keys, size_t tokens, size_t dim) {
  const double sqrt_dim = portable::sqrt(static_cast<double>(dim));
  double mean = 0.0, squares = 0.0;
  for (size_t t = kSinkTokens; t < tokens; ++t) {
    double dot = 0.0;
    for (size_t j = 0; j < dim; ++j) dot += q[j] * keys[t * dim + j];
    dot /= sqrt_dim;
    mean += dot;
    squares += dot * dot;
  }
  const double n = static_cast<double>(tokens - kSinkTokens);
  mean /= n;
  return portable::sqrt(std::max(squares / n - mean * mean, 1e-30));
}

}  // namespace

const std::vector<std::string>& synthetic_regimes() {
  static const std::vector<std::string> regimes = {"sink", "needle", "peaked", "long-tailed", "flat"};
  return regimes;
}

SyntheticModel parse_synthetic_model(const std::string& name) {
  if (name == "independent") return SyntheticModel::kIndependent;
  if (name == "hidden-state") return SyntheticModel::kHiddenState;
  throw Error(fmt::format("synthetic cache: unknown model '{}'; expected independent or hidden-state", name));
}

SyntheticCache make_synthetic_cache(const std::string& regime, size_t tokens, size_t dim, size_t queries,
                                    uint64_t seed, SyntheticModel model) {
  const auto& regimes = synthetic_regimes();
  require(std::find(regimes.begin(), regimes.end(), regime) != regimes.end(),
          "synthetic cache: unknown regime '{}'; expected sink, needle, peaked, long-tailed, flat or default", regime);
  require(dim >= 8 && dim % 2 == 0, "synthetic cache: dim must be even and >= 8, got {}", dim);
  require(tokens >= kSinkTokens + 2 * kNeedles, "synthetic cache: needs at least {} tokens, got {}",
          kSinkTokens + 2 * kNeedles, tokens);
  require(queries >= 1, "synthetic cache: needs at least one query");
  SyntheticCache cache{regime, tokens, dim, queries, std::vector<float>(tokens * dim), std::vector<float>(tokens * dim),
                       std::vector<float>(queries * dim)};
  const synthetic::GeneratedCache made = model == SyntheticModel::kHiddenState
                                             ? synthetic::generate_hidden_state(cache, seed)
                                             : synthetic::generate_independent(cache, seed);

  RandomStream query_stream(seed, StreamPurpose::kQueries, {tokens, dim, queries});
  const double sqrt_dim = portable::sqrt(static_cast<double>(dim));
  for (size_t q = 0; q < queries; ++q) {
    std::vector<double> u = made.query_direction(query_stream);
    double spread = 1.5;
    if (regime == "peaked") spread = 3.0;
    if (regime == "flat") spread = 0.3;
    if (regime == "needle") {
      // Point at a few body tokens' keys (centre removed) and make them stand out by ~10 logits.
      std::vector<double> target(dim, 0.0);
      for (size_t n = 0; n < kNeedles; ++n) {
        const size_t t = kSinkTokens + query_stream.below(tokens - kSinkTokens);
        for (size_t j = 0; j < dim; ++j) target[j] += cache.keys[t * dim + j] - made.key_center[j];
      }
      double norm = 0.0;
      for (double x : target) norm += x * x;
      norm = portable::sqrt(norm);
      for (size_t j = 0; j < dim; ++j) u[j] = 0.2 * u[j] + target[j] / norm;
      spread = 2.5;
    }
    const double current = logit_spread(u, cache.keys, tokens, dim);
    // A sink key holds sink_strength along the sink direction: a query component a along it
    // adds a * sink_strength / sqrt(dim) to the sinks' logits. Every regime attends to sinks a little.
    const double sink_logit = regime == "sink" ? 10.0 : 0.5;
    const double sink_component = sink_logit * sqrt_dim / made.sink_strength;
    for (size_t j = 0; j < dim; ++j)
      cache.query_rows[q * dim + j] =
          static_cast<float>(u[j] * spread / current + sink_component * made.sink_direction[j]);
  }
  return cache;
}

}  // namespace kvsketch
