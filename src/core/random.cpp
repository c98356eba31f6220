#include "kvsketch/random.hpp"

#include <cmath>

namespace kvsketch {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

uint64_t derive_seed(uint64_t seed, std::initializer_list<uint64_t> path) {
  uint64_t state = seed ^ 0x6B76736B65746368ull;  // "kvsketch"
  uint64_t mixed = splitmix64(state);
  for (uint64_t step : path) {
    state = mixed ^ (step * 0xD6E8FEB86659FD93ull + 0x2545F4914F6CDD1Dull);
    mixed = splitmix64(state);
  }
  return mixed;
}

RandomStream::RandomStream(uint64_t seed) {
  uint64_t state = seed;
  for (auto& word : state_) word = splitmix64(state);
}

RandomStream::RandomStream(uint64_t seed, StreamPurpose purpose, std::initializer_list<uint64_t> path)
    : RandomStream(derive_seed(derive_seed(seed, {static_cast<uint64_t>(purpose)}), path)) {}

uint64_t RandomStream::next_u64() {
  const uint64_t result = rotl(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = rotl(state_[3], 45);
  return result;
}

double RandomStream::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

uint64_t RandomStream::below(uint64_t bound) {
  // Lemire's multiply-and-reject: exact uniformity without division in the common case.
  unsigned __int128 product = static_cast<unsigned __int128>(next_u64()) * bound;
  uint64_t low = static_cast<uint64_t>(product);
  if (low < bound) {
    const uint64_t threshold = (0 - bound) % bound;
    while (low < threshold) {
      product = static_cast<unsigned __int128>(next_u64()) * bound;
      low = static_cast<uint64_t>(product);
    }
  }
  return static_cast<uint64_t>(product >> 64);
}

double RandomStream::gaussian() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_gaussian_;
  }
  double u, v, s;
  do {
    u = 2.0 * uniform() - 1.0;
    v = 2.0 * uniform() - 1.0;
    s = u * u + v * v;
  } while (s >= 1.0 || s == 0.0);
  const double factor = std::sqrt(-2.0 * portable_log(s) / s);  // sqrt is exactly rounded (IEEE)
  spare_gaussian_ = v * factor;
  has_spare_ = true;
  return u * factor;
}

float RandomStream::sign() { return (next_u64() >> 63) ? -1.0f : 1.0f; }

double portable_log(double x) {
  int exponent = 0;
  double mantissa = std::frexp(x, &exponent);  // exact: x = mantissa * 2^exponent, mantissa in [0.5, 1)
  if (mantissa < 0.70710678118654752440) {
    mantissa *= 2.0;
    exponent -= 1;
  }
  // log(m) = 2 atanh(s), s = (m-1)/(m+1), |s| <= 0.1716: the series to s^21 is accurate to 1e-17.
  const double s = (mantissa - 1.0) / (mantissa + 1.0);
  const double s2 = s * s;
  double series = 1.0 / 21.0;
  for (int k = 19; k >= 1; k -= 2) series = series * s2 + 1.0 / k;
  return 2.0 * s * series + exponent * 0.69314718055994530942;
}

}  // namespace kvsketch
