// SoftmaxBalance (BalanceKV, Algorithm 2): the self-balancing walk over the lifted vectors
// phi(k) (x) v of a batch, through their kernel exp(<k_i, k_j> / sqrt(d)) <v_i, v_j> alone.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

namespace kvsketch {

struct WalkToken {
  uint32_t id;
  std::vector<float> key, value;
};

// What the walk balances besides the keys' exponential kernel.
enum class WalkValues {
  kAugmented,  // [v ; alpha]: <v_i, v_j> + alpha^2, alpha^2 the batch's mean ||v||^2 (numerator and denominator at once)
  kValues,     // <v_i, v_j>: the paper's numerator instances
  kOnes,       // 1: the paper's denominator instance (v = 1)
};

// +1 / -1 per token, in order. Keys are centred by the batch mean inside the kernel (a common
// factor exp(-<m, q> / sqrt(d)) of every signed sum, so the same sums are balanced) and the
// exponent shifted by its maximum (p_j is invariant to a common scale); temperature scales the
// exponent; p_j = 1/2 - gain * s_j / R^2 with R^2 the largest diagonal entry, clamped to [0, 1].
std::vector<int> balancing_walk_signs(std::span<const WalkToken> batch, WalkValues values, double gain,
                                      double temperature, uint64_t seed, std::initializer_list<uint64_t> path);

// Positions of the smaller sign class (ties: +1), as Algorithm 2 outputs.
std::vector<size_t> smaller_sign_class(const std::vector<int>& signs);

}  // namespace kvsketch
