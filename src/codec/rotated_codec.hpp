// RotatedCodec ("rotate:SPEC"): any codec applied to a randomized Hadamard rotation of x, as
// llama.cpp now rotates keys and values before q4_0: the rotation spreads an outlier channel over
// all channels, so that a group's shared scale fits them. Rotations are orthogonal, so
//   scores:       <q, x~> = <Pi q, (Pi x)~>                    (the query is rotated once)
//   weighted sum: sum w_i x~_i = Pi^T sum w_i (Pi x_i)~        (summed rotated, rotated back once)
// The inner codec sees only rotated rows and queries: its bytes, calibration and fast paths are
// unchanged. The rotation is seeded by the codec seed (two rounds, any dimension).
#pragma once
#include <memory>
#include <vector>

#include "codec/codec_base.hpp"
#include "kvsketch/transform.hpp"

namespace kvsketch {

class RotatedCodec final : public CodecBase {
 public:
  RotatedCodec(std::unique_ptr<VectorCodec> inner, uint64_t seed);
  std::string spec() const override { return "rotate:" + inner_->spec(); }
  size_t code_bytes() const override { return inner_->code_bytes(); }
  size_t state_bytes() const override { return inner_->state_bytes() + rotation_->bytes(); }
  size_t row_group() const override { return inner_->row_group(); }
  bool unbiased_inner_products() const override { return inner_->unbiased_inner_products(); }
  size_t accumulator_size() const override { return inner_->accumulator_size(); }
  void finish_accumulator(const float* accumulator, float* out) const override;

  void calibrate(const float* x, size_t n) override;
  bool calibrated_by_data() const override { return inner_->calibrated_by_data(); }
  std::vector<uint8_t> calibration() const override { return inner_->calibration(); }
  void set_calibration(const std::vector<uint8_t>& state) override { inner_->set_calibration(state); }

 protected:
  void encode_rows(const float* x, size_t n, uint8_t* codes, size_t first_row) const override;
  std::unique_ptr<PreparedQuery> prepare_query(const float* q) const override;
  bool reprepare_query(const float* q, PreparedQuery& into) const override;
  void score_rows(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const override;
  void accumulate_rows(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const override;
  void decode_rows(const uint8_t* codes, size_t n, float* out) const override;
  void score_rows_multi(const PreparedQuery* const* queries, size_t heads, const uint8_t* codes, size_t n, float* out,
                        size_t stride, Arithmetic arithmetic) const override;
  void accumulate_rows_multi(const float* weights, size_t heads, size_t stride, const uint8_t* codes, size_t n,
                             float* accumulators, Arithmetic arithmetic) const override;
  // The inner codec's layout: its query is the rotated one, and finish_accumulator rotates back.
  void describe_row(RowLayout& layout) const override { layout = inner_->row_layout(); }
  void key_domain(const PreparedQuery& q, float* out) const override;

 private:
  std::vector<float> rotated(const float* x, size_t n) const;

  std::unique_ptr<CodecBase> inner_;
  std::unique_ptr<Rotation> rotation_;
};

}  // namespace kvsketch
