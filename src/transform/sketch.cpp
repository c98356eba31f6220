#include <cmath>

#include "core/require.hpp"
#include "kvsketch/limits.hpp"
#include "kvsketch/random.hpp"
#include "kvsketch/transform.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {

double sphere_row_bias_factor(size_t dim) {
  const double d = static_cast<double>(dim);
  return std::sqrt(d / 2.0) * std::exp(std::lgamma(d / 2.0) - std::lgamma((d + 1.0) / 2.0));
}

SketchKind parse_sketch_kind(const std::string& text) {
  if (text == "gaussian") return SketchKind::kGaussian;
  if (text == "orthogonal") return SketchKind::kOrthogonal;
  if (text == "hadamard") return SketchKind::kHadamard;
  throw Error("sketch: expected one of gaussian, orthogonal, hadamard; got '" + text + "'");
}

std::string sketch_kind_name(SketchKind kind) {
  switch (kind) {
    case SketchKind::kGaussian: return "gaussian";
    case SketchKind::kOrthogonal: return "orthogonal";
    case SketchKind::kHadamard: return "hadamard";
  }
  return "?";
}

Sketch::Sketch(SketchKind kind, size_t rows, size_t dim, uint64_t seed, int hadamard_rounds)
    : kind_(kind), rows_(rows), dim_(dim) {
  require(rows >= 1, "Sketch: rows (m) must be >= 1, got {}", rows);
  require(dim >= 1, "Sketch: dim must be >= 1, got {}", dim);
  bias_factor_ = kind == SketchKind::kGaussian ? 1.0 : sphere_row_bias_factor(dim);
  const size_t blocks = (rows + dim - 1) / dim;
  if (kind == SketchKind::kHadamard) {
    for (size_t b = 0; b < blocks; ++b)
      blocks_.push_back(std::make_unique<RandomizedHadamard>(
          dim, hadamard_rounds, derive_seed(seed, {static_cast<uint64_t>(StreamPurpose::kSketch), b})));
    block_scale_ = static_cast<float>(std::sqrt(static_cast<double>(dim)));
    return;
  }
  require(kind != SketchKind::kOrthogonal || dim <= kMaxHaarDim,
          "sketch: an orthogonal sketch orthogonalizes blocks of {} x {} (O(d^3) work), offered up to {} dimensions; "
          "use sketch=hadamard or gaussian",
          dim, dim, kMaxHaarDim);
  require(rows <= kMaxDenseSketchValues / dim,
          "sketch: a {} sketch of {} rows x {} dimensions would hold {} floats, beyond {}; use sketch=hadamard",
          sketch_kind_name(kind), rows, dim, rows * dim, kMaxDenseSketchValues);
  columns_.resize(rows * dim);
  if (kind == SketchKind::kGaussian) {
    RandomStream stream(seed, StreamPurpose::kSketch, {rows, dim});
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < dim; ++c) columns_[c * rows + r] = static_cast<float>(stream.gaussian());
    return;
  }
  const double row_norm = std::sqrt(static_cast<double>(dim));
  for (size_t b = 0; b < blocks; ++b) {
    const std::vector<double> q =
        haar_orthogonal_matrix(dim, derive_seed(seed, {static_cast<uint64_t>(StreamPurpose::kSketch), rows, dim, b}));
    for (size_t i = 0; i < dim && b * dim + i < rows; ++i)
      for (size_t c = 0; c < dim; ++c) columns_[c * rows + b * dim + i] = static_cast<float>(q[i * dim + c] * row_norm);
  }
}

void Sketch::project(const float* x, float* out) const { project(x, out, true); }

void Sketch::project(const float* x, float* out, bool scaled) const {
  if (kind_ != SketchKind::kHadamard) {
    simd::matvec_columns(columns_.data(), rows_, dim_, x, out);
    return;
  }
  for (size_t b = 0; b < blocks_.size(); ++b) {
    const size_t count = std::min(dim_, rows_ - b * dim_);
    if (count == dim_) {  // full block: transform straight into the output
      blocks_[b]->apply(x, out + b * dim_);
      if (scaled) simd::scale(out + b * dim_, block_scale_, dim_);
      continue;
    }
    std::vector<float> block(dim_);
    blocks_[b]->apply(x, block.data());
    if (scaled) simd::scale(block.data(), block_scale_, dim_);
    std::copy(block.begin(), block.begin() + count, out + b * dim_);
  }
}

void Sketch::project_transpose_add(const float* z, float* out) const {
  if (kind_ != SketchKind::kHadamard) {
    for (size_t c = 0; c < dim_; ++c) out[c] += simd::dot(columns_.data() + c * rows_, z, rows_);
    return;
  }
  std::vector<float> block(dim_);
  for (size_t b = 0; b < blocks_.size(); ++b) {
    const size_t count = std::min(dim_, rows_ - b * dim_);
    std::fill(block.begin(), block.end(), 0.0f);
    std::copy(z + b * dim_, z + b * dim_ + count, block.begin());
    blocks_[b]->apply_transpose(block.data(), block.data());
    simd::axpy(block_scale_, block.data(), out, dim_);
  }
}

size_t Sketch::bytes() const {
  size_t total = columns_.size() * sizeof(float);
  for (const auto& block : blocks_) total += block->bytes();
  return total;
}

}  // namespace kvsketch
