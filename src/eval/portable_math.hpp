// Math for the synthetic generator from + - * / only, so that generated caches have the same bits
// on every machine and standard library.
#pragma once
#include <cstddef>
#include <vector>

#include "kvsketch/random.hpp"

namespace kvsketch::portable {

void cos_sin(double x, double& c, double& s);
double sqrt(double x);
// RoPE frequencies of the dim / 2 channel pairs: 10000^(-2 i / dim).
std::vector<double> rope_frequencies(size_t dim);
// Rotates channel pairs (2i, 2i+1) by position * frequencies[i], in place.
void apply_rope(double* vector, const std::vector<double>& frequencies, double position);
// Scales v to unit norm (v / sqrt(sum v^2), in order).
void normalize(std::vector<double>& v);
// A Gaussian direction: dim draws from `stream`, normalized.
std::vector<double> unit_gaussian(RandomStream& stream, size_t dim);

}  // namespace kvsketch::portable
