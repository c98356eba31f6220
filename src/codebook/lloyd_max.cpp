// Lloyd-Max on a fine grid: cumulative integrals of f, u f and u^2 f (midpoint rule, 2^18 cells)
// give cell masses and moments by interpolation, accurate to ~1e-9; iterations start from the
// high-resolution optimum (quantiles of f^(1/3)) and stop when no centroid moves by 1e-12.
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <mutex>

#include "kvsketch/codebook.hpp"
#include "core/require.hpp"

namespace kvsketch {
namespace {

constexpr int kMaxBits = 8;
constexpr size_t kCells = size_t{1} << 18;

class CumulativeTables {
 public:
  CumulativeTables(CoordinateLaw law, size_t dim) {
    const double d = static_cast<double>(dim);
    limit_ = law == CoordinateLaw::kGaussian ? 12.0 : std::min(std::sqrt(d), 12.0);
    step_ = 2.0 * limit_ / kCells;
    const double beta_constant =
        std::exp(std::lgamma(d / 2.0) - std::lgamma((d - 1.0) / 2.0)) / std::sqrt(M_PI) / std::sqrt(d);
    for (auto* table : {&mass_, &first_, &second_, &companded_}) table->assign(kCells + 1, 0.0);
    for (size_t k = 0; k < kCells; ++k) {
      const double u = -limit_ + (k + 0.5) * step_;
      double density;
      if (law == CoordinateLaw::kGaussian) {
        density = std::exp(-0.5 * u * u) / std::sqrt(2.0 * M_PI);
      } else {
        density = beta_constant * std::exp((d - 3.0) / 2.0 * std::log1p(-u * u / d));
      }
      mass_[k + 1] = mass_[k] + density * step_;
      first_[k + 1] = first_[k] + u * density * step_;
      second_[k + 1] = second_[k] + u * u * density * step_;
      companded_[k + 1] = companded_[k] + std::cbrt(density) * step_;
    }
  }
  double limit() const { return limit_; }
  double mass(double t) const { return at(mass_, t); }
  double first(double t) const { return at(first_, t); }
  double second(double t) const { return at(second_, t); }
  // mass(t) and first(t) from one position computation: the same values, in half the work.
  void mass_and_first(double t, double& mass, double& first) const {
    const Position at_t = locate(t);
    mass = interpolate(mass_, at_t);
    first = interpolate(first_, at_t);
  }
  // The u where the cumulative f^(1/3) reaches `fraction` of its total.
  double companded_quantile(double fraction) const {
    const double target = fraction * companded_.back();
    const size_t k = std::lower_bound(companded_.begin(), companded_.end(), target) - companded_.begin();
    return -limit_ + std::min(k, kCells) * step_;
  }

 private:
  struct Position {
    size_t cell;
    double fraction;
  };
  Position locate(double t) const {
    const double position = (std::clamp(t, -limit_, limit_) + limit_) / step_;
    const size_t k = std::min(static_cast<size_t>(position), kCells - 1);
    return {k, position - k};
  }
  static double interpolate(const std::vector<double>& table, Position p) {
    return table[p.cell] + p.fraction * (table[p.cell + 1] - table[p.cell]);
  }
  double at(const std::vector<double>& table, double t) const { return interpolate(table, locate(t)); }
  double limit_, step_;
  std::vector<double> mass_, first_, second_, companded_;
};

// Centroids and boundaries in x units for dimension dim, from centroids_scaled (units of sqrt(d) x).
void place_in_dimension(Codebook& book, size_t dim) {
  const double to_x = 1.0 / std::sqrt(static_cast<double>(dim));
  const std::vector<double>& c = book.centroids_scaled;
  book.dim = dim;
  book.centroids.clear();
  book.boundaries.clear();
  for (const double value : c) book.centroids.push_back(static_cast<float>(value * to_x));
  for (size_t i = 1; i < c.size(); ++i) book.boundaries.push_back(static_cast<float>(0.5 * (c[i - 1] + c[i]) * to_x));
}

Codebook solve(const CumulativeTables& tables, CoordinateLaw law, size_t dim, int bits) {
  Codebook book{law, dim, bits, 0.0, {}, {}, {}, {}};
  const size_t levels = size_t{1} << bits;
  std::vector<double> c(levels), edges(levels + 1);
  for (size_t i = 0; i < levels; ++i) c[i] = tables.companded_quantile((i + 0.5) / levels);
  if (levels == 1) c[0] = 0.0;
  edges[0] = -tables.limit();
  edges[levels] = tables.limit();
  // Each edge's mass and first moment are looked up once per iteration (shared by its two cells).
  std::vector<double> edge_mass(levels + 1), edge_first(levels + 1);
  for (int iteration = 0; iteration < 200000; ++iteration) {
    for (size_t i = 1; i < levels; ++i) edges[i] = 0.5 * (c[i - 1] + c[i]);
    for (size_t i = 0; i <= levels; ++i) tables.mass_and_first(edges[i], edge_mass[i], edge_first[i]);
    double largest_move = 0.0;
    for (size_t i = 0; i < levels; ++i) {
      const double mass = edge_mass[i + 1] - edge_mass[i];
      if (mass <= 0.0) continue;
      const double updated = (edge_first[i + 1] - edge_first[i]) / mass;
      largest_move = std::max(largest_move, std::abs(updated - c[i]));
      c[i] = updated;
    }
    if (largest_move < 1e-12) break;
  }
  // The law is symmetric: average mirrored centroids so the codebook is exactly symmetric.
  for (size_t i = 0; i < levels / 2; ++i) {
    const double magnitude = 0.5 * (c[levels - 1 - i] - c[i]);
    c[i] = -magnitude;
    c[levels - 1 - i] = magnitude;
  }
  if (levels % 2 == 1) c[levels / 2] = 0.0;
  for (size_t i = 1; i < levels; ++i) edges[i] = 0.5 * (c[i - 1] + c[i]);
  const double total = tables.mass(tables.limit()) - tables.mass(-tables.limit());
  double cost = 0.0;
  for (size_t i = 0; i < levels; ++i) {
    const double mass = tables.mass(edges[i + 1]) - tables.mass(edges[i]);
    const double first = tables.first(edges[i + 1]) - tables.first(edges[i]);
    const double second = tables.second(edges[i + 1]) - tables.second(edges[i]);
    cost += second - 2.0 * c[i] * first + c[i] * c[i] * mass;
    book.cell_probability.push_back(mass / total);
  }
  book.cost = cost / total;
  book.centroids_scaled = c;
  place_in_dimension(book, dim);
  return book;
}

}  // namespace

std::string coordinate_law_name(CoordinateLaw law) { return law == CoordinateLaw::kBeta ? "beta" : "gaussian"; }

const Codebook& lloyd_max_codebook(CoordinateLaw law, size_t dim, int bits) {
  require(bits >= 0 && bits <= kMaxBits, "codebook: bits must be in 0..{}, got {}", kMaxBits, bits);
  require(dim >= 2, "codebook: dim must be >= 2, got {}", dim);
  static std::mutex mutex;
  static std::map<std::pair<int, size_t>, std::array<std::unique_ptr<Codebook>, kMaxBits + 1>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto& books = cache[{static_cast<int>(law), dim}];
  if (books[bits]) return *books[bits];
  // Only the width asked for: the iterations grow with the levels (about 1,500 at 4 bits,
  // 200,000 at 8), so solving every width up front cost half a second per dimension.
  if (law == CoordinateLaw::kGaussian && dim != 2) {
    // The Gaussian law's centroids in units of sqrt(d) x do not depend on d: solved once (dim 2),
    // then only placed in this dimension, as solve() does (the same bits as solving again).
    auto& reference = cache[{static_cast<int>(law), 2}];
    if (!reference[bits]) reference[bits] = std::make_unique<Codebook>(solve(CumulativeTables(law, 2), law, 2, bits));
    Codebook book = *reference[bits];
    place_in_dimension(book, dim);
    books[bits] = std::make_unique<Codebook>(std::move(book));
  } else {
    // The tables are large (8 MB) and are dropped afterwards.
    books[bits] = std::make_unique<Codebook>(solve(CumulativeTables(law, dim), law, dim, bits));
  }
  return *books[bits];
}

}  // namespace kvsketch
