#include "portable_math.hpp"

namespace kvsketch::portable {
namespace {
constexpr double kTwoPi = 6.283185307179586476925286766559;
}

// Range reduction, then the Taylor series.
void cos_sin(double x, double& c, double& s) {
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

double sqrt(double x) {
  if (x <= 0.0) return 0.0;
  double r = x > 1.0 ? x : 1.0;
  for (int i = 0; i < 200; ++i) r = 0.5 * (r + x / r);  // Newton: converges to the correctly rounded root or its neighbour
  return r;
}

// exp(-(2i/d) ln 10000) by squaring a Taylor series.
std::vector<double> rope_frequencies(size_t dim) {
  std::vector<double> out(dim / 2);
  for (size_t pair = 0; pair < out.size(); ++pair) {
    const double exponent = -(2.0 * static_cast<double>(pair) / static_cast<double>(dim)) * portable_log(10000.0);
    double scaled = exponent / 1024.0, term = 1.0, value = 0.0;
    for (int k = 0; k < 30; ++k) {
      value += term;
      term *= scaled / (k + 1);
    }
    for (int i = 0; i < 10; ++i) value *= value;
    out[pair] = value;
  }
  return out;
}

void apply_rope(double* vector, const std::vector<double>& frequencies, double position) {
  for (size_t pair = 0; pair < frequencies.size(); ++pair) {
    double c, s;
    cos_sin(position * frequencies[pair], c, s);
    const double a = vector[2 * pair], b = vector[2 * pair + 1];
    vector[2 * pair] = a * c - b * s;
    vector[2 * pair + 1] = a * s + b * c;
  }
}

void normalize(std::vector<double>& v) {
  double norm = 0.0;
  for (double x : v) norm += x * x;
  norm = sqrt(norm);
  for (auto& x : v) x /= norm;
}

std::vector<double> unit_gaussian(RandomStream& stream, size_t dim) {
  std::vector<double> v(dim);
  for (auto& x : v) x = stream.gaussian();
  normalize(v);
  return v;
}

}  // namespace kvsketch::portable
