// CenteredCodec ("center:SPEC"): any codec applied to x - mu, with mu the per-channel mean of the
// calibration rows (stored in fp16; the rounded value is the one used). LLM keys share a large
// common offset that carries no information for attention, since q.(k - mu) differs from q.k by the
// same q.mu for every token; without it the norm, and so a rotation codec's error, is much smaller.
//   scores:       <q, x~> = <q, mu> + <q, (x - mu)~>       (exact shift, so log-sum-exp merges hold)
//   weighted sum: sum w_i x~_i = mu * sum w_i + sum w_i (x_i - mu)~
// Calibration also calibrates the inner codec, on the centred rows. The state is the fp16 mean
// (2 * dim bytes) followed by the inner codec's state; a cache counts it per head.
#pragma once
#include <memory>
#include <vector>

#include "codec/codec_base.hpp"

namespace kvsketch {

class CenteredCodec final : public CodecBase {
 public:
  explicit CenteredCodec(std::unique_ptr<VectorCodec> inner);
  std::string spec() const override { return "center:" + inner_->spec(); }
  size_t code_bytes() const override { return inner_->code_bytes(); }
  size_t state_bytes() const override { return inner_->state_bytes() + mean_.size() * sizeof(float); }
  size_t row_group() const override { return inner_->row_group(); }
  bool unbiased_inner_products() const override { return inner_->unbiased_inner_products(); }
  // The inner accumulator, then the sum of the weights.
  size_t accumulator_size() const override { return inner_->accumulator_size() + 1; }
  void finish_accumulator(const float* accumulator, float* out) const override;

  void calibrate(const float* x, size_t n) override;
  bool calibrated_by_data() const override { return true; }
  std::vector<uint8_t> calibration() const override;
  void set_calibration(const std::vector<uint8_t>& state) override;
  const std::vector<float>& mean() const { return mean_; }
  const VectorCodec& inner() const { return *inner_; }

 protected:
  void encode_rows(const float* x, size_t n, uint8_t* codes, size_t first_row) const override;
  std::unique_ptr<PreparedQuery> prepare_query(const float* q) const override;
  bool reprepare_query(const float* q, PreparedQuery& into) const override;
  void score_rows(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const override;
  void accumulate_rows(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const override;
  // Rows decoded by the inner codec, plus the mean, where its rows are read in groups (the default
  // decodes one row at a time, which such a codec cannot: KIVI keys share a group's scales).
  void decode_rows(const uint8_t* codes, size_t n, float* out) const override;
  void score_rows_multi(const PreparedQuery* const* queries, size_t heads, const uint8_t* codes, size_t n, float* out,
                        size_t stride, Arithmetic arithmetic) const override;
  // The inner codec's layout, the keys' shift <q, mu> per head, and the values' weight sum in the
  // accumulator's last slot.
  void describe_row(RowLayout& layout) const override;
  void key_domain(const PreparedQuery& q, float* out) const override;
  float key_shift(const PreparedQuery& q) const override;
  void accumulate_rows_multi(const float* weights, size_t heads, size_t stride, const uint8_t* codes, size_t n,
                             float* accumulators, Arithmetic arithmetic) const override;

 private:
  // Rows x (n x dim) minus the mean.
  std::vector<float> centred(const float* x, size_t n) const;

  std::unique_ptr<CodecBase> inner_;
  std::vector<float> mean_;  // fp16-representable
};

}  // namespace kvsketch
