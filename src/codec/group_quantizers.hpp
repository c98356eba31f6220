// Group-wise integer quantizers measured next to the sketches at equal bytes:
//   kivi_k  KIVI keys: each channel quantized over a group of G tokens (asymmetric min/max,
//           b bits). The group's per-channel minimum and step (fp16) are spread over its G rows,
//           ceil(4 d / G) bytes each, so a row's bytes stay fixed; rows come in whole groups.
//   kivi_v  KIVI values: each token quantized in groups of G channels (asymmetric min/max).
//   q4_0    llama.cpp's q4_0: each token in groups of 32 channels, one fp16 scale per group
//           (signed absmax / -8), 4-bit values q with x = scale (q - 8).
// In a KV policy, "kivi:b=B,group=G" names the pair: kivi_k for keys, kivi_v for values.
// Row layouts: kivi_k [values: ceil(d b / 8)][share of the group's minima and steps]
//              kivi_v [values: ceil(d b / 8)][per channel group: fp16 min, fp16 step]
//              q4_0   [values: ceil(d / 2)][per channel group: fp16 scale]
#pragma once
#include "kvsketch/codec.hpp"

namespace kvsketch {

enum class GroupScheme { kKiviKeys, kKiviValues, kQ4_0 };

class GroupQuantizer final : public VectorCodec {
 public:
  GroupQuantizer(size_t dim, GroupScheme scheme, int bits, size_t group);
  std::string spec() const override;
  size_t code_bytes() const override { return code_bytes_; }
  size_t row_group() const override { return scheme_ == GroupScheme::kKiviKeys ? group_ : 1; }

 protected:
  void encode_rows(const float* x, size_t n, uint8_t* codes, size_t first_row) const override;
  void decode_rows(const uint8_t* codes, size_t n, float* out) const override;
  std::unique_ptr<PreparedQuery> prepare_query(const float* q) const override;
  void score_rows(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const override;
  void accumulate_rows(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const override;
  bool decode_domain_rows(const uint8_t* codes, size_t n, float* rows, float* row_scale) const override;
  const float* domain_query(const PreparedQuery& q) const override;

 private:
  size_t channel_groups() const { return (dim() + group_ - 1) / group_; }
  GroupScheme scheme_;
  int bits_;
  size_t group_, value_bytes_, meta_offset_, code_bytes_;
};

}  // namespace kvsketch
