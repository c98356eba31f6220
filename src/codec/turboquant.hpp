// TurboQuant (Zandieh et al.): random rotation + Lloyd-Max scalar codes (Algorithm 1, "mse"), and
// the same at b-1 bits plus 1-bit QJL on the residual (Algorithm 2, "prod": unbiased inner
// products). Vectors of any norm: the input norm is stored (fp16 by default) and the unit vector
// is quantized; prod also stores the residual norm gamma. The QJL stage works on the residual in
// the rotated domain (S independent of Pi, so S Pi^T is as random as S).
//
// Row layout: [indices: ceil(d (b') / 8) bytes][prod: ceil(d / 8) sign bytes][norm][prod: gamma]
// with b' = b for mse and b - 1 for prod.
#pragma once
#include <memory>
#include <optional>

#include "codec/norm_storage.hpp"
#include "codec/scalar_code_stage.hpp"
#include "codec/sign_code_stage.hpp"
#include "codec/codec_base.hpp"
#include "kvsketch/transform.hpp"
#include "simd/row_kernels.hpp"

namespace kvsketch {

struct TurboQuantOptions {
  bool residual_signs = false;  // false: TurboQuant_mse; true: TurboQuant_prod
  int bits = 4;                 // total bits per coordinate
  RotationKind rotation = RotationKind::kHadamard;
  int rounds = 2;               // Hadamard rounds (rotation and sketch)
  CoordinateLaw law = CoordinateLaw::kBeta;
  NormPrecision norm = NormPrecision::kFp16;
  // mse only: store ||x|| / <u, u~> in place of ||x|| (u = x / ||x||, u~ its decoded codeword), so
  // that <x, x~> = ||x||^2 exactly and, over the random rotation, E[x~] = x: inner products and
  // weighted sums of values lose the mse codebook's shrinkage bias (<u, u~> ~= 1 - D_mse). Same bytes.
  bool rescale = false;
  SketchKind sketch = SketchKind::kHadamard;
  uint64_t seed = 0;
};

class TurboQuant final : public CodecBase {
 public:
  TurboQuant(size_t dim, const TurboQuantOptions& options);
  std::string spec() const override;
  size_t code_bytes() const override { return code_bytes_; }
  size_t state_bytes() const override { return rotation_->bytes() + (sketch_ ? sketch_->bytes() : 0); }
  bool unbiased_inner_products() const override { return options_.residual_signs; }
  size_t accumulator_size() const override { return dim() + (signs_ ? signs_->rows() : 0); }
  void finish_accumulator(const float* accumulator, float* out) const override;
  const ScalarCodeStage& scalar_stage() const { return scalar_; }
  // Distance between consecutive rows as this codec reads and writes them (default code_bytes()):
  // a ChannelSplit part reads its bytes inside the split's wider rows.
  void set_row_stride(size_t stride);
  float sign_scale() const { return sign_scale_; }
  // prod: the sketch of the residual signs (null for mse).
  const Sketch* sketch() const { return sketch_.get(); }

  // For scanners that read mse codes directly (the index's fast scan): score of a row =
  // norm (at norm_offset) * sum_j rotated_q[j] * centroids[index j], indices packed at `bits`
  // from byte 0 (bitpack.hpp). Absent for prod, whose rows also hold residual signs.
  struct ScanLayout {
    int bits;
    const float* centroids;
    size_t index_bytes, norm_offset;
    NormPrecision norm;
  };
  std::optional<ScanLayout> scan_layout() const;
  void rotate(const float* q, float* out) const { rotation_->apply(q, out); }
  const TurboQuantOptions& options() const { return options_; }
  const Rotation& rotation() const { return *rotation_; }

 protected:
  void encode_rows(const float* x, size_t n, uint8_t* codes, size_t first_row) const override {
    encode_rows_given(x, nullptr, n, codes, first_row);
  }
  void encode_rows_given(const float* x, const float* squared_norms, size_t n, uint8_t* codes,
                         size_t first_row) const override;
  std::unique_ptr<PreparedQuery> prepare_query(const float* q) const override;
  bool reprepare_query(const float* q, PreparedQuery& into) const override;
  void score_rows(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const override;
  void accumulate_rows(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const override;
  // Every query head reads each row of codes once, decoded in registers (simd/row_kernels).
  void score_rows_multi(const PreparedQuery* const* queries, size_t heads, const uint8_t* codes, size_t n, float* out,
                        size_t stride, Arithmetic arithmetic) const override;
  void accumulate_rows_multi(const float* weights, size_t heads, size_t stride, const uint8_t* codes, size_t n,
                             float* accumulators, Arithmetic arithmetic) const override;
  // Keys: mse's indices times the norm; prod's scalar and sign parts, their sum times the norm.
  // Values: mse only. Fields: the b'-bit indices in chunks of b' bytes, the signs in bytes, the
  // norm and gamma whole.
  void describe_row(RowLayout& layout) const override;
  // [rotated q | prod: S rotated q]
  void key_domain(const PreparedQuery& q, float* out) const override;

 private:
  simd::RowSource index_rows(const uint8_t* codes) const;
  // The QJL signs of rows of codes, with the residual norm gamma as their norm.
  SignCodeStage::Rows sign_part(const uint8_t* codes) const;
  float norm_of(const uint8_t* code) const { return load_norm(options_.norm, code + norm_offset_); }
  // Where the residual norm gamma lies in a code row: right after the norm.
  size_t gamma_offset() const { return norm_offset_ + norm_bytes(options_.norm); }
  float gamma_of(const uint8_t* code) const { return load_norm(options_.norm, code + gamma_offset()); }

  TurboQuantOptions options_;
  std::unique_ptr<Rotation> rotation_;
  ScalarCodeStage scalar_;
  std::unique_ptr<Sketch> sketch_;
  std::unique_ptr<SignCodeStage> signs_;
  float sign_scale_ = 0.0f;  // sqrt(pi/2) / (m * bias_factor)
  size_t sign_offset_, norm_offset_, code_bytes_, row_stride_;

  friend class ChannelSplit;    // calls the row functions of its parts
  friend class PcaTurboQuant;  // is this codec until it has a basis
};

}  // namespace kvsketch
