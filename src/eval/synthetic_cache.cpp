#include "kvsketch/synthetic_cache.hpp"

#include <algorithm>
#include <cmath>

#include "kvsketch/error.hpp"
#include "kvsketch/random.hpp"

namespace kvsketch {
namespace {

constexpr size_t kSinkTokens = 4;
constexpr size_t kNeedles = 3;
constexpr double kTwoPi = 6.283185307179586476925286766559;

// cos and sin from + - * / only (range reduction, then Taylor series): identical everywhere.
void portable_cos_sin(double x, double& c, double& s) {
  x -= kTwoPi * static_cast<double>(static_cast<long long>(x / kTwoPi));
  if (x > kTwoPi / 2) x -= kTwoPi;
  if (x < -kTwoPi / 2) x += kTwoPi;
  c = 0.0;
  s = 0.0;
  double term = 1.0;  // x^k / k!
  for (int k = 0; k < 40; ++k) {
    if (k % 4 == 0) c += term;
    if (k % 4 == 1) s += term;
    if (k % 4 == 2) c -= term;
    if (k % 4 == 3) s -= term;
    term *= x / (k + 1);
  }
}

// 10000^(-2i/d) = exp(-(2i/d) ln 10000), with exp by squaring of a Taylor series.
double rope_frequency(size_t pair, size_t dim) {
  const double exponent = -(2.0 * static_cast<double>(pair) / static_cast<double>(dim)) * portable_log(10000.0);
  double scaled = exponent / 1024.0, term = 1.0, value = 0.0;
  for (int k = 0; k < 30; ++k) {
    value += term;
    term *= scaled / (k + 1);
  }
  for (int i = 0; i < 10; ++i) value *= value;
  return value;
}

double portable_sqrt(double x) {
  if (x <= 0.0) return 0.0;
  double r = x > 1.0 ? x : 1.0;
  for (int i = 0; i < 200; ++i) r = 0.5 * (r + x / r);  // Newton: converges to the correctly rounded root or its neighbour
  return r;
}

std::vector<double> unit_gaussian(RandomStream& stream, size_t dim) {
  std::vector<double> v(dim);
  double norm = 0.0;
  for (auto& x : v) {
    x = stream.gaussian();
    norm += x * x;
  }
  norm = portable_sqrt(norm);
  for (auto& x : v) x /= norm;
  return v;
}

double logit_spread(const std::vector<double>& q, const std::vector<float>& keys, size_t tokens, size_t dim) {
  double mean = 0.0, squares = 0.0;
  for (size_t t = kSinkTokens; t < tokens; ++t) {
    double dot = 0.0;
    for (size_t j = 0; j < dim; ++j) dot += q[j] * keys[t * dim + j];
    dot /= portable_sqrt(static_cast<double>(dim));
    mean += dot;
    squares += dot * dot;
  }
  const double n = static_cast<double>(tokens - kSinkTokens);
  mean /= n;
  return portable_sqrt(std::max(squares / n - mean * mean, 1e-30));
}

}  // namespace

const std::vector<std::string>& synthetic_regimes() {
  static const std::vector<std::string> regimes = {"sink", "needle", "peaked", "long-tailed", "flat"};
  return regimes;
}

SyntheticCache make_synthetic_cache(const std::string& regime, size_t tokens, size_t dim, size_t queries,
                                    uint64_t seed) {
  const auto& regimes = synthetic_regimes();
  require(std::find(regimes.begin(), regimes.end(), regime) != regimes.end(),
          "synthetic cache: unknown regime '{}'; expected sink, needle, peaked, long-tailed, flat or default", regime);
  require(dim >= 8 && dim % 2 == 0, "synthetic cache: dim must be even and >= 8, got {}", dim);
  require(tokens >= kSinkTokens + 2 * kNeedles, "synthetic cache: needs at least {} tokens, got {}",
          kSinkTokens + 2 * kNeedles, tokens);
  require(queries >= 1, "synthetic cache: needs at least one query");
  SyntheticCache cache{regime, tokens, dim, queries, std::vector<float>(tokens * dim), std::vector<float>(tokens * dim),
                       std::vector<float>(queries * dim)};

  RandomStream stream(seed, StreamPurpose::kData, {tokens, dim});
  std::vector<double> key_offset(dim), key_scale(dim, 1.0), value_offset(dim), value_scale(dim, 1.0);
  for (size_t j = 0; j < dim; ++j) {
    key_offset[j] = 1.5 * stream.gaussian();
    value_offset[j] = 0.3 * stream.gaussian();
    value_scale[j] = 0.5 + stream.uniform();
  }
  for (int k = 0; k < 4; ++k) key_scale[stream.below(dim)] = 10.0;  // outlier channels
  for (int k = 0; k < 2; ++k) value_scale[stream.below(dim)] *= 3.0;
  const std::vector<double> sink_direction = unit_gaussian(stream, dim);
  const double sink_strength = 3.0 * portable_sqrt(static_cast<double>(dim));
  for (size_t t = 0; t < tokens; ++t) {
    std::vector<double> k(dim);
    for (size_t j = 0; j < dim; ++j) {
      k[j] = key_offset[j] + key_scale[j] * stream.gaussian();
      if (t < kSinkTokens) k[j] += sink_strength * sink_direction[j];
    }
    for (size_t pair = 0; pair < dim / 2; ++pair) {  // RoPE on channel pairs (2i, 2i+1)
      double c, s;
      portable_cos_sin(static_cast<double>(t) * rope_frequency(pair, dim), c, s);
      const double a = k[2 * pair], b = k[2 * pair + 1];
      k[2 * pair] = a * c - b * s;
      k[2 * pair + 1] = a * s + b * c;
    }
    for (size_t j = 0; j < dim; ++j) {
      cache.keys[t * dim + j] = static_cast<float>(k[j]);
      cache.values[t * dim + j] = static_cast<float>(value_offset[j] + value_scale[j] * stream.gaussian());
    }
  }

  RandomStream query_stream(seed, StreamPurpose::kQueries, {tokens, dim, queries});
  const double sqrt_dim = portable_sqrt(static_cast<double>(dim));
  for (size_t q = 0; q < queries; ++q) {
    std::vector<double> u = unit_gaussian(query_stream, dim);
    double spread = 1.5;
    if (regime == "peaked") spread = 3.0;
    if (regime == "flat") spread = 0.3;
    if (regime == "needle") {
      // Point at a few body tokens' keys (offset removed) and make them stand out by ~10 logits.
      std::vector<double> target(dim, 0.0);
      for (size_t n = 0; n < kNeedles; ++n) {
        const size_t t = kSinkTokens + query_stream.below(tokens - kSinkTokens);
        for (size_t j = 0; j < dim; ++j) target[j] += cache.keys[t * dim + j] - key_offset[j];
      }
      double norm = 0.0;
      for (double x : target) norm += x * x;
      norm = portable_sqrt(norm);
      for (size_t j = 0; j < dim; ++j) u[j] = 0.2 * u[j] + target[j] / norm;
      spread = 2.5;
    }
    const double current = logit_spread(u, cache.keys, tokens, dim);
    // A sink key holds sink_strength along the sink direction: a query component a along it
    // adds a * sink_strength / sqrt(dim) to the sinks' logits. Every regime attends to sinks a little.
    const double sink_logit = regime == "sink" ? 10.0 : 0.5;
    const double sink_component = sink_logit * sqrt_dim / sink_strength;
    for (size_t j = 0; j < dim; ++j)
      cache.query_rows[q * dim + j] = static_cast<float>(u[j] * spread / current + sink_component * sink_direction[j]);
  }
  return cache;
}

}  // namespace kvsketch
