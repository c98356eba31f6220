// PcaTurboQuant ("tq_pca:b=B"): TurboQuant_mse with the per-vector rescale, after a principal-
// component basis with the bits allocated by reverse water-filling, for data whose variance is
// concentrated in a few directions (SIFT descriptors, image pixels, real embeddings).
//
// A random rotation spreads every vector's energy evenly over the coordinates, which is what makes
// one scalar codebook right for all of them, but it also spreads the data's anisotropy: the same b
// bits go to directions of large and of negligible variance. Classical transform coding does
// better: rotate into the principal components (eigenvectors of the second-moment matrix of the
// calibration rows), then give each component bits by reverse water-filling, so that a component
// with 4x the variance gets about one bit more, and components below the water level get none.
// Here the allocation is per block of 8 components (whole bytes for any width); each run of blocks
// with the same width is a group, randomly rotated on its own (Hadamard) and quantized by the
// Lloyd-Max codebook of its dimension, scaled by the group's expected share of the norm. One
// factor per vector, ||x|| / <y, y~> (y = P x / ||x||), makes <x, x~> = ||x||^2 as in tq_mse's
// rescale=1. The bytes equal tq_mse:b=B's: the packed indices (exactly ceil(d B / 8) bytes) and
// one fp16 factor; the basis (d^2 floats) and the eigenvalues are the calibration state.
//
// Calibration is one pass, no iterations over the data beyond a power iteration: with pca=auto
// (the default) the basis is used only with at least 2d rows and when the leading eigenvalue of the calibration rows stands
// well above what isotropic data of that size shows (the Marchenko-Pastur edge); otherwise, and
// before calibration, the codec is exactly tq_mse:b=B,rescale=1 with the same seed (same codes),
// which keeps the O(d log d) encoding and the index's fast scan for isotropic data.
#pragma once
#include <memory>
#include <vector>

#include "codec/norm_storage.hpp"
#include "codec/scalar_code_stage.hpp"
#include "codec/turboquant.hpp"
#include "codec/codec_base.hpp"
#include "kvsketch/transform.hpp"
#include "simd/row_kernels.hpp"

namespace kvsketch {

enum class PcaMode { kAuto, kOn, kOff };

struct PcaTurboQuantOptions {
  int bits = 4;
  PcaMode mode = PcaMode::kAuto;
  NormPrecision norm = NormPrecision::kFp16;
  uint64_t seed = 0;
};

class PcaTurboQuant final : public CodecBase {
 public:
  PcaTurboQuant(size_t dim, const PcaTurboQuantOptions& options);
  ~PcaTurboQuant() override;
  std::string spec() const override;
  size_t code_bytes() const override { return plain_->code_bytes(); }
  size_t state_bytes() const override {
    size_t total = plain_->state_bytes() + (basis_.size() + eigenvalues_.size()) * sizeof(float);
    for (const Group& group : groups_) total += group.rotation ? group.rotation->bytes() : 0;
    return total;
  }
  size_t accumulator_size() const override { return dim(); }
  void finish_accumulator(const float* accumulator, float* out) const override;

  void calibrate(const float* x, size_t n) override;
  bool calibrated_by_data() const override { return true; }
  std::vector<uint8_t> calibration() const override;
  void set_calibration(const std::vector<uint8_t>& state) override;

  // The codec it equals while no basis is in use (uncalibrated, pca=off, or isotropic data), else
  // null: scanners that read tq_mse codes directly (the index's fast scan) use it.
  const TurboQuant* plain() const { return basis_.empty() ? plain_.get() : nullptr; }
  // Bits of each component, in basis order (all B while plain).
  std::vector<int> component_bits() const;

 protected:
  void encode_rows(const float* x, size_t n, uint8_t* codes, size_t first_row) const override {
    encode_rows_given(x, nullptr, n, codes, first_row);
  }
  void encode_rows_given(const float* x, const float* squared_norms, size_t n, uint8_t* codes,
                         size_t first_row) const override;
  std::unique_ptr<PreparedQuery> prepare_query(const float* q) const override;
  void score_rows(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const override;
  void accumulate_rows(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const override;
  // While plain, TurboQuant's; with a basis, the row kernels once per group (any width).
  void score_rows_multi(const PreparedQuery* const* queries, size_t heads, const uint8_t* codes, size_t n, float* out,
                        size_t stride, Arithmetic arithmetic) const override;
  void accumulate_rows_multi(const float* weights, size_t heads, size_t stride, const uint8_t* codes, size_t n,
                             float* accumulators, Arithmetic arithmetic) const override;

 private:
  struct Group {
    size_t first, size, offset;  // components [first, first + size); index bytes from offset
    float weight;                // sqrt(share of the variance): the group's expected part of a unit vector
    std::unique_ptr<ScalarCodeStage> stage;
    std::unique_ptr<Rotation> rotation;
  };
  // Installs a basis (rows: components by descending eigenvalue, at least the coded ones; the rest
  // are dropped) and builds the groups; an empty
  // basis returns to the plain codec.
  void use_basis(std::vector<float> basis, std::vector<float> eigenvalues);
  // y = P x (the coded components only; the rest are not needed), for `count` rows x (d apart) and
  // y (coded components apart).
  void project(const float* x, size_t count, float* y) const;
  void encode_projected(float* y, float norm, uint8_t* code, float* unit, uint8_t* scratch) const;
  simd::RowSource group_rows(const Group& group, const uint8_t* codes) const;

  PcaTurboQuantOptions options_;
  std::unique_ptr<TurboQuant> plain_;
  std::vector<float> basis_;        // d x d, row k = component k; empty while plain
  std::vector<float> eigenvalues_;  // d, descending
  std::vector<Group> groups_;
  size_t coded_components_ = 0;     // components with bits > 0 (a prefix of the basis)
  size_t factor_offset_ = 0;
};

}  // namespace kvsketch
