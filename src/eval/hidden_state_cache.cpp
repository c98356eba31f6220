// Keys and values as two projections of one hidden state per token, the way a transformer layer
// makes them: k_t = RoPE_t(c_k + A h_t + noise), v_t = c_v + B h_t + noise, h_t ~ N(0, I_r).
// Because both depend on h_t, the tokens a query scores highly also have values that differ
// from the rest, which is what makes dropping the tail (top-k) biased. The keys' offset sits on
// the low-frequency quarter of the channels, so that they lie in a cone around their centroid
// (MagicPIG, section 3.2) with a spread much smaller than the independent model's. RoPE still
// turns those channels over a long context: measured (SparseClaims.HiddenStateKeysLieInACone) at
// 8,192 tokens, cos(k, c) 0.78 and ||k - c||^2 / sqrt(d) 11 (independent: 0.17 and 67); at 65,536
// tokens the cone is gone (cos 0.10). The lowest-frequency channels alone would keep it.
#include <algorithm>

#include "portable_math.hpp"
#include "synthetic_models.hpp"

namespace kvsketch::synthetic {
namespace {

// Per-channel standard deviations: the hidden state's share of a key channel and of a value
// channel (before the value's channel scale), and the noise of each; rank r = d / 8. Before RoPE
// the centred keys have ||k - c||^2 / sqrt(d) of about 3 at d = 128 against a centroid of about 15.
constexpr double kKeyLoad = 0.5, kKeyNoise = 0.15, kValueLoad = 0.8, kValueNoise = 0.4;
constexpr double kOutlierOffset = 6.0;

}  // namespace

GeneratedCache generate_hidden_state(SyntheticCache& cache, uint64_t seed) {
  const size_t tokens = cache.tokens, dim = cache.dim;
  const size_t rank = std::max<size_t>(4, dim / 8);
  const size_t low_start = dim - dim / 4;  // the low-frequency quarter of the channels
  RandomStream stream(seed, StreamPurpose::kData, {tokens, dim, rank});
  std::vector<double> key_offset(dim), value_offset(dim), value_scale(dim);
  for (size_t j = 0; j < dim; ++j) {
    key_offset[j] = (j >= low_start ? 1.5 : 0.2) * stream.gaussian();
    value_offset[j] = 0.3 * stream.gaussian();
    value_scale[j] = 0.5 + stream.uniform();
  }
  for (int k = 0; k < 4; ++k)  // outlier channels: large, nearly constant magnitude
    key_offset[low_start + stream.below(dim - low_start)] += stream.sign() * kOutlierOffset;
  for (int k = 0; k < 2; ++k) value_scale[stream.below(dim)] *= 3.0;
  const double inv_sqrt_rank = 1.0 / portable::sqrt(static_cast<double>(rank));
  std::vector<double> key_map(dim * rank), value_map(dim * rank);
  for (size_t j = 0; j < dim; ++j)
    for (size_t l = 0; l < rank; ++l) {
      key_map[j * rank + l] = kKeyLoad * inv_sqrt_rank * stream.gaussian();
      value_map[j * rank + l] = kValueLoad * value_scale[j] * inv_sqrt_rank * stream.gaussian();
    }
  GeneratedCache out;
  out.sink_direction = portable::unit_gaussian(stream, dim);
  out.sink_strength = 3.0 * portable::sqrt(static_cast<double>(dim));
  const std::vector<double> frequencies = portable::rope_frequencies(dim);
  std::vector<double> hidden(rank), k(dim);
  for (size_t t = 0; t < tokens; ++t) {
    for (auto& h : hidden) h = stream.gaussian();
    for (size_t j = 0; j < dim; ++j) {
      double key = key_offset[j] + kKeyNoise * stream.gaussian(), value = value_offset[j];
      for (size_t l = 0; l < rank; ++l) {
        key += key_map[j * rank + l] * hidden[l];
        value += value_map[j * rank + l] * hidden[l];
      }
      if (t < kSinkTokens) key += out.sink_strength * out.sink_direction[j];
      k[j] = key;
      cache.values[t * dim + j] = static_cast<float>(value + kValueNoise * value_scale[j] * stream.gaussian());
    }
    portable::apply_rope(k.data(), frequencies, static_cast<double>(t));
    for (size_t j = 0; j < dim; ++j) cache.keys[t * dim + j] = static_cast<float>(k[j]);
  }
  out.key_center = key_offset;
  // A query asks for a direction in hidden-state space, through the key map, at the decode position.
  out.query_direction = [dim, rank, key_map, tokens, frequencies](RandomStream& s) {
    std::vector<double> q(dim, 0.0), w(rank);
    for (auto& x : w) x = s.gaussian();
    for (size_t j = 0; j < dim; ++j)
      for (size_t l = 0; l < rank; ++l) q[j] += key_map[j * rank + l] * w[l];
    portable::apply_rope(q.data(), frequencies, static_cast<double>(tokens));
    portable::normalize(q);
    return q;
  };
  return out;
}

}  // namespace kvsketch::synthetic
