// Exact logits q k_i / sqrt(d) of every body token: what the oracle baselines (top-k, oracle
// sampling) look at, and what makes them oracles.
#pragma once
#include <vector>

#include "kvsketch/sparse_attention.hpp"

namespace kvsketch {

std::vector<float> body_logits(const float* query, const BodyView& body);
// log sum_i exp(logits_i), computed stably.
double log_sum_exp(const std::vector<float>& logits);

}  // namespace kvsketch
