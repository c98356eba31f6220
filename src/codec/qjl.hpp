// QJL (Zandieh, Daliri, Han): a key is stored as the signs of an m-row JL projection plus its
// norm; a query is projected in full precision, and
//   <q, k>  ~=  sqrt(pi/2) / (m c) * ||k|| * <S q, sign(S k)>
// is unbiased (c = Sketch::bias_factor(): 1 for Gaussian rows, c_d for rows of norm sqrt(d)).
// Optional outlier split (QJL section 4.1): `outliers` channels, chosen by calibrate() as the
// channels of largest mean square, get their own sketch of m_out rows; each part stores its norm.
//
// Row layout: [inlier signs: ceil(m / 8)][outlier signs: ceil(m_out / 8)][inlier norm][outlier norm]
// (the outlier parts only when outliers > 0). The channel list belongs to the codec (per layer and
// head in a cache): its calibration state, counted by the cache, not by code_bytes().
#pragma once
#include <memory>

#include "codec/norm_storage.hpp"
#include "codec/sign_code_stage.hpp"
#include "codec/codec_base.hpp"

namespace kvsketch {

struct QjlOptions {
  size_t rows = 0;            // m; 0 means m = dim
  SketchKind sketch = SketchKind::kOrthogonal;
  size_t outliers = 0;
  size_t outlier_rows = 0;    // m_out; 0 means 32 * outliers
  NormPrecision norm = NormPrecision::kFp16;
  int rounds = 2;             // for the Hadamard sketch
  uint64_t seed = 0;
};

class Qjl final : public CodecBase {
 public:
  Qjl(size_t dim, const QjlOptions& options);
  std::string spec() const override;
  size_t code_bytes() const override { return code_bytes_; }
  size_t state_bytes() const override {
    return (inlier_sketch_ ? inlier_sketch_->bytes() : 0) + (outlier_sketch_ ? outlier_sketch_->bytes() : 0);
  }
  bool unbiased_inner_products() const override { return true; }
  void calibrate(const float* x, size_t n) override;
  bool calibrated_by_data() const override { return options_.outliers > 0; }
  std::vector<uint8_t> calibration() const override;
  void set_calibration(const std::vector<uint8_t>& state) override;
  void set_outlier_channels(const std::vector<size_t>& channels);
  const std::vector<size_t>& outlier_channels() const { return outlier_channels_; }
  const QjlOptions& options() const { return options_; }
  // The inlier channels' sketch and its estimator's scale sqrt(pi/2) / (m c).
  const Sketch& inlier_sketch() const { return *inlier_sketch_; }
  float inlier_scale() const { return inlier_scale_; }
  size_t accumulator_size() const override;
  void finish_accumulator(const float* accumulator, float* out) const override;

 protected:
  void encode_rows(const float* x, size_t n, uint8_t* codes, size_t first_row) const override;
  std::unique_ptr<PreparedQuery> prepare_query(const float* q) const override;
  void score_rows(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const override;
  void accumulate_rows(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const override;
  void score_rows_multi(const PreparedQuery* const* queries, size_t heads, const uint8_t* codes, size_t n, float* out,
                        size_t stride, Arithmetic arithmetic) const override;
  void accumulate_rows_multi(const float* weights, size_t heads, size_t stride, const uint8_t* codes, size_t n,
                             float* accumulators, Arithmetic arithmetic) const override;

 private:
  // The sign stages: 0 the inlier channels', 1 the outlier channels' (where there are outliers).
  size_t parts_() const { return outlier_signs_ ? 2 : 1; }
  const SignCodeStage& stage(size_t which) const { return which ? *outlier_signs_ : *inlier_signs_; }
  SignCodeStage::Rows part_rows(const uint8_t* codes, size_t which) const;
  // Splits x into its inlier and outlier coordinates (in channel order).
  void split(const float* x, float* inliers, float* outliers) const;
  float load(const uint8_t* code, size_t which) const {
    return load_norm(options_.norm, code + norm_offset_ + which * norm_bytes(options_.norm));
  }

  QjlOptions options_;
  std::vector<size_t> outlier_channels_;
  std::vector<size_t> inlier_channels_;
  std::unique_ptr<Sketch> inlier_sketch_, outlier_sketch_;
  std::unique_ptr<SignCodeStage> inlier_signs_, outlier_signs_;
  float inlier_scale_ = 0, outlier_scale_ = 0;
  size_t outlier_offset_ = 0, norm_offset_ = 0, code_bytes_ = 0;
};

}  // namespace kvsketch
