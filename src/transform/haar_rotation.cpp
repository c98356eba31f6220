#include <Eigen/Core>
#include <Eigen/QR>
#include <cmath>

#include "kvsketch/codec.hpp"
#include "core/require.hpp"
#include "kvsketch/random.hpp"
#include "kvsketch/transform.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {

std::vector<double> haar_orthogonal_matrix(size_t n, uint64_t stream_seed) {
  // Eigen picks its blocking from the cache sizes it detects; fixing them (and using one thread)
  // makes the QR, and so the rotation, bit-identical on every machine.
  Eigen::setCpuCacheSizes(32 * 1024, 1024 * 1024, 8 * 1024 * 1024);
  Eigen::setNbThreads(1);
  RandomStream stream(stream_seed);
  Eigen::MatrixXd gaussian(n, n);
  for (size_t r = 0; r < n; ++r)
    for (size_t c = 0; c < n; ++c) gaussian(r, c) = stream.gaussian();
  Eigen::HouseholderQR<Eigen::MatrixXd> qr(gaussian);
  Eigen::MatrixXd q = qr.householderQ();
  const Eigen::MatrixXd& packed = qr.matrixQR();
  // Q * diag(sign(R_ii)) is exactly Haar-distributed; plain Q is not.
  std::vector<double> result(n * n);
  for (size_t c = 0; c < n; ++c) {
    const double sign = packed(c, c) < 0.0 ? -1.0 : 1.0;
    for (size_t r = 0; r < n; ++r) result[r * n + c] = q(r, c) * sign;
  }
  return result;
}

HaarRotation::HaarRotation(size_t dim, uint64_t seed) : dim_(dim) {
  require(dim >= 1 && dim <= kMaxHaarDim,
          "rotation=haar: dimension must be in 1..{} (a dense rotation costs O(d^3) to build), got {}; "
          "rotation=hadamard takes any dimension",
          kMaxHaarDim, dim);
  const std::vector<double> pi = haar_orthogonal_matrix(dim, derive_seed(seed, {static_cast<uint64_t>(StreamPurpose::kRotation), dim}));
  columns_.resize(dim * dim);
  transposed_.resize(dim * dim);
  for (size_t r = 0; r < dim; ++r)
    for (size_t c = 0; c < dim; ++c) {
      const float value = static_cast<float>(pi[r * dim + c]);
      transposed_[c * dim + r] = value;  // Pi, column-major: used by apply
      columns_[r * dim + c] = value;     // Pi^T, column-major: used by apply_transpose
    }
}

void HaarRotation::apply_scaled(const float* x, float scale, float* out) const {
  std::vector<float> input(dim_);
  for (size_t j = 0; j < dim_; ++j) input[j] = x[j] * scale;
  simd::matvec_columns(transposed_.data(), dim_, dim_, input.data(), out);
}

void HaarRotation::apply_transpose(const float* x, float* out) const {
  std::vector<float> input(x, x + dim_);
  simd::matvec_columns(columns_.data(), dim_, dim_, input.data(), out);
}

std::unique_ptr<Rotation> make_rotation(RotationKind kind, size_t dim, uint64_t seed, int hadamard_rounds) {
  if (kind == RotationKind::kHaar) return std::make_unique<HaarRotation>(dim, seed);
  return std::make_unique<RandomizedHadamard>(dim, hadamard_rounds, seed);
}

}  // namespace kvsketch
