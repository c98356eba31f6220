#include "codec/pca_turboquant.hpp"

#include <Eigen/Core>
#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fmt/format.h>

#include "codec/spec_of.hpp"
#include "kvsketch/bitpack.hpp"
#include "core/require.hpp"
#include "kvsketch/random.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {
namespace {

constexpr size_t kBlock = 8;              // components per allocation block: whole bytes at any width
constexpr size_t kCheckRows = 1024;       // rows of the isotropy check
constexpr int kPowerIterations = 16;
constexpr double kAnisotropyMargin = 2.0;  // leading eigenvalue over the isotropic edge that turns PCA on
constexpr uint64_t kGroupRotationStream = 11;

struct PcaQuery : PreparedQuery {
  std::unique_ptr<PreparedQuery> plain;  // while plain
  std::vector<float> rotated;            // d: each group's w_g * R_g (P q)_g, then zeros
};

// Lloyd-Max distortion of a unit-variance Gaussian coordinate at b bits (b = 0: the variance).
double gaussian_distortion(int bits) { return lloyd_max_codebook(CoordinateLaw::kGaussian, 2, bits).cost; }

// Bits per block of kBlock components (the last block takes the remainder) by reverse
// water-filling: each further bit goes to the block where it removes the most distortion per bit.
// Greedy is optimal here since the distortion is convex in the bits.
std::vector<int> allocate_bits(const std::vector<float>& eigenvalues, size_t budget_bits) {
  const size_t d = eigenvalues.size(), blocks = std::max<size_t>(1, d / kBlock);
  std::vector<double> variance(blocks, 0.0);
  std::vector<size_t> size(blocks, 0);
  for (size_t j = 0; j < d; ++j) {
    const size_t b = std::min(j / kBlock, blocks - 1);
    variance[b] += std::max(0.0f, eigenvalues[j]);
    ++size[b];
  }
  std::vector<int> bits(blocks, 0);
  double distortion[9];
  for (int b = 0; b <= 8; ++b) distortion[b] = gaussian_distortion(b);
  size_t left = budget_bits;
  while (true) {
    size_t best = blocks;
    double best_gain = 0.0;
    for (size_t b = 0; b < blocks; ++b) {
      if (bits[b] == 8 || size[b] > left) continue;
      const double gain = variance[b] / static_cast<double>(size[b]) * (distortion[bits[b]] - distortion[bits[b] + 1]);
      if (gain > best_gain) best_gain = gain, best = b;
    }
    if (best == blocks) break;
    ++bits[best];
    left -= size[best];
  }
  std::vector<int> per_component(d);
  for (size_t j = 0; j < d; ++j) per_component[j] = bits[std::min(j / kBlock, blocks - 1)];
  return per_component;
}

// Leading eigenvalue of the second-moment matrix of rows (power iteration) and its trace.
std::pair<double, double> leading_eigenvalue_and_trace(const float* x, size_t n, size_t d, uint64_t seed) {
  RandomStream stream(seed, StreamPurpose::kRotation, {kGroupRotationStream, 1});
  std::vector<float> v(d), next(d);
  for (float& value : v) value = static_cast<float>(stream.gaussian());
  simd::scale(v.data(), 1.0f / std::sqrt(simd::sum_of_squares(v.data(), d)), d);
  double trace = 0.0, lambda = 0.0;
  for (size_t i = 0; i < n; ++i) trace += simd::sum_of_squares(x + i * d, d);
  for (int iteration = 0; iteration < kPowerIterations; ++iteration) {
    std::fill(next.begin(), next.end(), 0.0f);
    for (size_t i = 0; i < n; ++i) simd::axpy(simd::fixed_order_dot(x + i * d, v.data(), d), x + i * d, next.data(), d);
    const float norm = std::sqrt(simd::sum_of_squares(next.data(), d));
    if (norm == 0.0f) return {0.0, trace / static_cast<double>(n)};
    lambda = norm / static_cast<double>(n);
    simd::scale(next.data(), 1.0f / norm, d);
    v.swap(next);
  }
  return {lambda, trace / static_cast<double>(n)};
}

}  // namespace

PcaTurboQuant::PcaTurboQuant(size_t dim, const PcaTurboQuantOptions& options) : CodecBase(dim), options_(options) {
  require(dim >= 2, "codec 'tq_pca': dimension must be >= 2, got {}", dim);
  TurboQuantOptions plain;
  plain.bits = options.bits;
  plain.rescale = true;
  plain.norm = options.norm;
  plain.seed = options.seed;
  plain_ = std::make_unique<TurboQuant>(dim, plain);
  factor_offset_ = packed_bytes(dim, options.bits);
  // The bit allocation weighs every width's distortion, and the groups' codebooks derive from
  // these: solved now (once per process; about 0.5 s, mostly the 8-bit one), not inside
  // calibration. pca=off never uses a basis from calibration.
  if (options.mode != PcaMode::kOff)
    for (int b = 0; b <= 8; ++b) gaussian_distortion(b);
}

PcaTurboQuant::~PcaTurboQuant() = default;

std::string PcaTurboQuant::spec() const {
  const char* mode = options_.mode == PcaMode::kAuto ? "auto" : options_.mode == PcaMode::kOn ? "on" : "off";
  return fmt::format("tq_pca:b={},pca={},norm={},seed={}", options_.bits, mode, norm_precision_name(options_.norm),
                     options_.seed);
}

std::vector<int> PcaTurboQuant::component_bits() const {
  std::vector<int> bits(dim(), basis_.empty() ? options_.bits : 0);
  for (const Group& group : groups_) std::fill_n(bits.begin() + group.first, group.size, group.stage->bits());
  return bits;
}

void PcaTurboQuant::calibrate(const float* x, size_t n) {
  if (n == 0 || options_.mode == PcaMode::kOff) return;
  require_finite(x, n, dim(), "calibrate");
  const size_t d = dim();
  if (options_.mode == PcaMode::kAuto) {
    // Fewer rows than 2d leave components unseen: vectors outside their span would lose that
    // energy. Isotropic rows of this count show a leading eigenvalue near mean * (1 + sqrt(d / n))^2.
    if (n < 2 * d) return use_basis({}, {});
    const size_t rows = std::min(n, kCheckRows);
    const auto [leading, trace] = leading_eigenvalue_and_trace(x, rows, d, options_.seed);
    const double edge = trace / static_cast<double>(d) *
                        std::pow(1.0 + std::sqrt(static_cast<double>(d) / static_cast<double>(rows)), 2.0);
    if (!(leading > kAnisotropyMargin * edge)) {
      use_basis({}, {});
      return;
    }
  }
  // Second moments in double, in a fixed order; the eigensolver with fixed blocking and one
  // thread, as for the Haar rotation: the same basis on every machine.
  Eigen::MatrixXd moments = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(d), static_cast<Eigen::Index>(d));
  std::vector<double> row(d);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < d; ++j) row[j] = x[i * d + j];
    for (size_t a = 0; a < d; ++a) {
      const double scale = row[a];
      double* column = moments.data() + a * d;  // column a, lower part from a
      for (size_t b = a; b < d; ++b) column[b] += scale * row[b];
    }
  }
  moments /= static_cast<double>(n);
  Eigen::setCpuCacheSizes(32 * 1024, 1024 * 1024, 8 * 1024 * 1024);
  Eigen::setNbThreads(1);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> solver(moments, Eigen::ComputeEigenvectors);
  require(solver.info() == Eigen::Success, "calibrate: the eigendecomposition of the {}x{} second moments failed", d, d);
  std::vector<float> basis(d * d), eigenvalues(d);
  for (size_t k = 0; k < d; ++k) {
    const Eigen::Index source = static_cast<Eigen::Index>(d - 1 - k);  // Eigen sorts ascending
    eigenvalues[k] = static_cast<float>(std::max(0.0, solver.eigenvalues()(source)));
    // Sign convention: the largest entry of each component positive.
    Eigen::Index largest = 0;
    solver.eigenvectors().col(source).cwiseAbs().maxCoeff(&largest);
    const double sign = solver.eigenvectors()(largest, source) < 0.0 ? -1.0 : 1.0;
    for (size_t j = 0; j < d; ++j)
      basis[k * d + j] = static_cast<float>(sign * solver.eigenvectors()(static_cast<Eigen::Index>(j), source));
  }
  use_basis(std::move(basis), std::move(eigenvalues));
}

void PcaTurboQuant::use_basis(std::vector<float> basis, std::vector<float> eigenvalues) {
  groups_.clear();
  coded_components_ = 0;
  basis_.clear();
  eigenvalues_.clear();
  if (basis.empty()) return;
  const size_t d = dim();
  const std::vector<int> bits = allocate_bits(eigenvalues, factor_offset_ * 8);
  double total = 0.0;
  for (const float value : eigenvalues) total += value;
  size_t offset = 0;
  for (size_t first = 0; first < d && bits[first] > 0;) {
    size_t end = first;
    double variance = 0.0;
    while (end < d && bits[end] == bits[first]) variance += eigenvalues[end++];
    Group group;
    group.first = first;
    group.size = end - first;
    group.offset = offset;
    group.weight = static_cast<float>(std::sqrt(variance / total));
    group.stage = std::make_unique<ScalarCodeStage>(group.size, bits[first], CoordinateLaw::kGaussian);
    group.rotation = make_rotation(RotationKind::kHadamard, group.size,
                                   derive_seed(options_.seed, {kGroupRotationStream, groups_.size()}));
    offset += group.stage->bytes();
    groups_.push_back(std::move(group));
    first = end;
  }
  if (groups_.empty()) return;  // no variance at all: stay plain
  coded_components_ = groups_.back().first + groups_.back().size;
  basis.resize(coded_components_ * d);
  basis_ = std::move(basis);
  eigenvalues_ = std::move(eigenvalues);
}

std::vector<uint8_t> PcaTurboQuant::calibration() const {
  if (basis_.empty()) return {0};
  std::vector<uint8_t> state(1 + 4 * (eigenvalues_.size() + basis_.size()));
  state[0] = 1;
  std::memcpy(state.data() + 1, eigenvalues_.data(), 4 * eigenvalues_.size());
  std::memcpy(state.data() + 1 + 4 * eigenvalues_.size(), basis_.data(), 4 * basis_.size());
  return state;
}

void PcaTurboQuant::set_calibration(const std::vector<uint8_t>& state) {
  require(!state.empty() && state[0] <= 1, "{}: calibration state is not a tq_pca state", SpecOf{*this});
  if (state[0] == 0) {
    require(state.size() == 1, "{}: calibration state has {} bytes, expected 1", SpecOf{*this}, state.size());
    use_basis({}, {});
    return;
  }
  const size_t d = dim();
  require(state.size() >= 1 + 4 * d, "{}: calibration state has {} bytes, too few for {} eigenvalues", SpecOf{*this},
          state.size(), d);
  std::vector<float> eigenvalues(d);
  std::memcpy(eigenvalues.data(), state.data() + 1, 4 * d);
  for (size_t k = 0; k < d; ++k)
    require(std::isfinite(eigenvalues[k]) && eigenvalues[k] >= 0.0f && (k == 0 || eigenvalues[k] <= eigenvalues[k - 1]),
            "{}: calibration eigenvalue {} is {} (must be finite, >= 0 and descending)", SpecOf{*this}, k,
            eigenvalues[k]);
  // The allocation follows from the eigenvalues; the state holds the basis rows it codes.
  const std::vector<int> bits = allocate_bits(eigenvalues, factor_offset_ * 8);
  const size_t coded = static_cast<size_t>(std::find(bits.begin(), bits.end(), 0) - bits.begin());
  require(coded > 0, "{}: calibration eigenvalues code no component", SpecOf{*this});
  require(state.size() == 1 + 4 * (d + coded * d), "{}: calibration state has {} bytes, expected {}", SpecOf{*this},
          state.size(), 1 + 4 * (d + coded * d));
  std::vector<float> basis(coded * d);
  std::memcpy(basis.data(), state.data() + 1 + 4 * d, 4 * coded * d);
  for (size_t i = 0; i < coded * d; ++i)
    require(std::isfinite(basis[i]), "{}: calibration basis entry {} is not finite", SpecOf{*this}, i);
  use_basis(std::move(basis), std::move(eigenvalues));
}

// Basis rows outside, rows inside: each basis row is read from memory once for all the rows (at
// d = 784 the basis is 2.4 MB, past L2, and was read again for every row).
void PcaTurboQuant::project(const float* x, size_t count, float* y) const {
  const size_t d = dim(), coded = coded_components_;
  for (size_t k = 0; k < coded; ++k)
    for (size_t r = 0; r < count; ++r) y[r * coded + k] = simd::fixed_order_dot(basis_.data() + k * d, x + r * d, d);
}

// Rows projected at a time by encode: their floats stay in L2 while the basis streams past.
constexpr size_t kProjectedRows = 16;

void PcaTurboQuant::encode_rows_given(const float* x, const float* squared_norms, size_t n, uint8_t* codes,
                                      size_t first_row) const {
  if (basis_.empty()) return plain_->encode_rows_given(x, squared_norms, n, codes, first_row);
  const size_t d = dim(), bytes = code_bytes(), coded = coded_components_;
  std::vector<float> projected(kProjectedRows * coded), norms(kProjectedRows), unit(d);
  std::vector<uint8_t> scratch(d);
  for (size_t start = 0; start < n; start += kProjectedRows) {
    const size_t count = std::min(kProjectedRows, n - start);
    for (size_t r = 0; r < count; ++r)
      norms[r] = finite_norm(x + (start + r) * d, first_row + start + r,
                             squared_norms ? squared_norms + start + r : nullptr);
    project(x + start * d, count, projected.data());
    for (size_t r = 0; r < count; ++r)
      encode_projected(projected.data() + r * coded, norms[r], codes + (start + r) * bytes, unit.data(),
                       scratch.data());
  }
}

// One row's code from its projection y = P x (overwritten) and ||x||; unit and scratch: d of each.
void PcaTurboQuant::encode_projected(float* y, float norm, uint8_t* code, float* unit, uint8_t* scratch) const {
  std::memset(code, 0, code_bytes());
  if (norm == 0.0f) return;
  simd::scale(y, 1.0f / norm, coded_components_);
  // <y, y~> summed over the groups: w_g^2 <u_g, u_g~> each.
  float inner = 0.0f;
  for (const Group& group : groups_) {
    group.rotation->apply(y + group.first, unit);
    simd::scale(unit, 1.0f / group.weight, group.size);
    inner += group.weight * group.weight * group.stage->encode_codeword_product(unit, code + group.offset, scratch);
  }
  // A row with (almost) nothing in the coded components scores 0 rather than a huge factor.
  store_norm(options_.norm, inner > 1e-4f ? norm / inner : 0.0f, code + factor_offset_);
}

std::unique_ptr<PreparedQuery> PcaTurboQuant::prepare_query(const float* q) const {
  auto prepared = std::make_unique<PcaQuery>();
  if (basis_.empty()) {
    prepared->plain = plain_->prepare_query(q);
    return prepared;
  }
  std::vector<float> y(coded_components_);
  project(q, 1, y.data());
  prepared->rotated.assign(dim(), 0.0f);
  for (const Group& group : groups_) {
    float* rotated = prepared->rotated.data() + group.first;
    group.rotation->apply(y.data() + group.first, rotated);
    simd::scale(rotated, group.weight, group.size);
  }
  return prepared;
}

simd::RowSource PcaTurboQuant::group_rows(const Group& group, const uint8_t* codes) const {
  return {simd::RowFormat::kIndex, codes + group.offset, code_bytes(), group.size, group.stage->bits(),
          group.stage->codebook().centroids.data(), code_bytes() - group.offset};
}

void PcaTurboQuant::score_rows(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const {
  if (basis_.empty()) return plain_->score_rows(*static_cast<const PcaQuery&>(q).plain, codes, n, out);
  score_rows_one_head(q, codes, n, out);
}

void PcaTurboQuant::score_rows_multi(const PreparedQuery* const* queries, size_t heads, const uint8_t* codes,
                                     size_t n, float* out, size_t stride, Arithmetic arithmetic) const {
  if (basis_.empty()) {
    std::vector<const PreparedQuery*> inner(heads);
    for (size_t h = 0; h < heads; ++h) inner[h] = static_cast<const PcaQuery&>(*queries[h]).plain.get();
    return plain_->score_rows_multi(inner.data(), heads, codes, n, out, stride, arithmetic);
  }
  for (size_t h = 0; h < heads; ++h) std::fill_n(out + h * stride, n, 0.0f);
  std::vector<float> group_queries, part(heads * n);
  for (const Group& group : groups_) {
    group_queries.resize(heads * group.size);
    for (size_t h = 0; h < heads; ++h)
      std::copy_n(static_cast<const PcaQuery&>(*queries[h]).rotated.data() + group.first, group.size,
                  group_queries.data() + h * group.size);
    simd::row_scores(group_rows(group, codes), n, group_queries.data(), heads, 1.0f, part.data(), n);
    for (size_t h = 0; h < heads; ++h)
      for (size_t i = 0; i < n; ++i) out[h * stride + i] += part[h * n + i];
  }
  std::vector<float> factors(n);
  load_norms(options_.norm, codes + factor_offset_, code_bytes(), n, factors.data());
  for (size_t h = 0; h < heads; ++h)
    for (size_t i = 0; i < n; ++i) out[h * stride + i] *= factors[i];
}

void PcaTurboQuant::accumulate_rows_multi(const float* weights, size_t heads, size_t stride, const uint8_t* codes,
                                          size_t n, float* accumulators, Arithmetic arithmetic) const {
  if (basis_.empty())
    return plain_->accumulate_rows_multi(weights, heads, stride, codes, n, accumulators, arithmetic);
  std::vector<float> factors(n), scaled(heads * n);
  load_norms(options_.norm, codes + factor_offset_, code_bytes(), n, factors.data());
  for (const Group& group : groups_) {
    for (size_t h = 0; h < heads; ++h)
      for (size_t i = 0; i < n; ++i) scaled[h * n + i] = weights[h * stride + i] * factors[i] * group.weight;
    simd::row_weighted_sum(group_rows(group, codes), n, scaled.data(), heads, n, accumulators + group.first, dim());
  }
}

// One query's weighted sum: the multi-query form with one head (the row kernels, once per group).
void PcaTurboQuant::accumulate_rows(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const {
  accumulate_rows_one_head(weights, codes, n, accumulator);
}

void PcaTurboQuant::finish_accumulator(const float* accumulator, float* out) const {
  if (basis_.empty()) return plain_->finish_accumulator(accumulator, out);
  std::vector<float> components(coded_components_);
  for (const Group& group : groups_)
    group.rotation->apply_transpose(accumulator + group.first, components.data() + group.first);
  for (size_t k = 0; k < coded_components_; ++k) simd::axpy(components[k], basis_.data() + k * dim(), out, dim());
}

}  // namespace kvsketch
