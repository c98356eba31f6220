// Keys and values drawn independently of each other, channel by channel.
#include "portable_math.hpp"
#include "synthetic_models.hpp"

namespace kvsketch::synthetic {

GeneratedCache generate_independent(SyntheticCache& cache, uint64_t seed) {
  const size_t tokens = cache.tokens, dim = cache.dim;
  RandomStream stream(seed, StreamPurpose::kData, {tokens, dim});
  std::vector<double> key_offset(dim), key_scale(dim, 1.0), value_offset(dim), value_scale(dim, 1.0);
  for (size_t j = 0; j < dim; ++j) {
    key_offset[j] = 1.5 * stream.gaussian();
    value_offset[j] = 0.3 * stream.gaussian();
    value_scale[j] = 0.5 + stream.uniform();
  }
  for (int k = 0; k < 4; ++k) key_scale[stream.below(dim)] = 10.0;  // outlier channels
  for (int k = 0; k < 2; ++k) value_scale[stream.below(dim)] *= 3.0;
  GeneratedCache out;
  out.sink_direction = portable::unit_gaussian(stream, dim);
  out.sink_strength = 3.0 * portable::sqrt(static_cast<double>(dim));
  const std::vector<double> frequencies = portable::rope_frequencies(dim);
  std::vector<double> k(dim);
  for (size_t t = 0; t < tokens; ++t) {
    for (size_t j = 0; j < dim; ++j) {
      k[j] = key_offset[j] + key_scale[j] * stream.gaussian();
      if (t < kSinkTokens) k[j] += out.sink_strength * out.sink_direction[j];
    }
    portable::apply_rope(k.data(), frequencies, static_cast<double>(t));
    for (size_t j = 0; j < dim; ++j) {
      cache.keys[t * dim + j] = static_cast<float>(k[j]);
      cache.values[t * dim + j] = static_cast<float>(value_offset[j] + value_scale[j] * stream.gaussian());
    }
  }
  out.key_center = key_offset;
  out.query_direction = [dim](RandomStream& s) { return portable::unit_gaussian(s, dim); };
  return out;
}

}  // namespace kvsketch::synthetic
