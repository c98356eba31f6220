// Seeded random streams that give the same numbers on every machine, compiler and standard
// library: xoshiro256** seeded through SplitMix64, and an own Gaussian sampler (Marsaglia's polar
// method over a logarithm built from + - * / only), because std::normal_distribution and libm
// differ between platforms.
#pragma once
#include <cstdint>
#include <initializer_list>

// The library is built with hidden visibility: what this header declares is its exported API.
#pragma GCC visibility push(default)
namespace kvsketch {

// What a stream is used for; part of the derivation path so that streams never collide.
enum class StreamPurpose : uint64_t {
  kRotation = 1,
  kSketch = 2,
  kOutlierSketch = 3,
  kData = 4,
  kQueries = 5,
  kTest = 6,
  kCoarseQuantizer = 7,  // the IVF index's k-means
};

// Mixes a seed with a path of integers (purpose, layer, head, block, ...) into a new seed.
uint64_t derive_seed(uint64_t seed, std::initializer_list<uint64_t> path);

class RandomStream {
 public:
  explicit RandomStream(uint64_t seed);
  RandomStream(uint64_t seed, StreamPurpose purpose, std::initializer_list<uint64_t> path = {});

  uint64_t next_u64();
  double uniform();                    // in [0, 1), 53 random bits
  uint64_t below(uint64_t bound);      // uniform integer in [0, bound), bound >= 1, unbiased
  double gaussian();                   // N(0, 1)
  float sign();                        // +1 or -1 with probability 1/2 each

 private:
  uint64_t state_[4];
  double spare_gaussian_ = 0.0;
  bool has_spare_ = false;
};

// Natural logarithm of x > 0 from IEEE + - * / only: bit-identical on every platform.
double portable_log(double x);

}  // namespace kvsketch
#pragma GCC visibility pop
