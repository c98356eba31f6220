// Group-wise integer quantizers measured next to the sketches at equal bytes:
//   kivi_k  KIVI keys: each channel quantized over a group of G tokens (asymmetric min/max,
//           b bits). The group's per-channel minimum and step (fp16) are spread over its G rows,
//           ceil(4 d / G) bytes each, so a row's bytes stay fixed; rows come in whole groups.
//   kivi_v  KIVI values: each token quantized in groups of G channels (asymmetric min/max).
//   q4_0    llama.cpp's q4_0: each token in groups of 32 channels, one fp16 scale per group
//           (signed absmax / -8), 4-bit values q with x = scale (q - 8).
//   q8_0    llama.cpp's q8_0: groups of 32 channels, fp16 scale absmax / 127, 8-bit values q with
//           x = scale (q - 128), q in 1..255.
// In a KV policy, "kivi:b=B,group=G" names the pair: kivi_k for keys, kivi_v for values.
// Row layouts: kivi_k [values: ceil(d b / 8)][share of the group's minima and steps]
//              kivi_v [values: ceil(d b / 8)][per channel group: fp16 min, fp16 step]
//              q4_0, q8_0   [values: ceil(d b / 8)][per channel group: fp16 scale]
#pragma once
#include <vector>

#include "codec/codec_base.hpp"
#include "simd/int_index_kernels.hpp"

namespace kvsketch {

enum class GroupScheme { kKiviKeys, kKiviValues, kQ4_0, kQ8_0 };

class GroupQuantizer final : public CodecBase {
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
  void score_rows_multi(const PreparedQuery* const* queries, size_t heads, const uint8_t* codes, size_t n, float* out,
                        size_t stride, Arithmetic arithmetic) const override;
  void accumulate_rows_multi(const float* weights, size_t heads, size_t stride, const uint8_t* codes, size_t n,
                             float* accumulators, Arithmetic arithmetic) const override;
  // q4_0: each channel group a part of 4-bit indices into (level - 8) with its fp16 scale as the
  // row factor, so that decode attention runs in the fused integer kernel; its fields the levels
  // in chunks of 4 bytes and each scale, so that rows in quads read as TurboQuant's do.
  void describe_row(RowLayout& layout) const override;
  void key_domain(const PreparedQuery& q, float* out) const override;

 private:
  size_t channel_groups() const { return (dim() + group_ - 1) / group_; }
  // q4_0 and q8_0: one scale per channel group, x = scale (level - center).
  bool scaled() const { return scheme_ == GroupScheme::kQ4_0 || scheme_ == GroupScheme::kQ8_0; }
  int center() const { return scheme_ == GroupScheme::kQ8_0 ? 128 : 8; }
  // Keys: the fp16 minima and steps of the group of rows starting at `rows` as floats,
  // meta[c] = minimum, meta[d + c] = step (halves: scratch).
  void key_group_meta(const uint8_t* rows, std::vector<uint16_t>& halves, float* meta) const;
  // Values and q4_0: the minimum and step of channel group g for `count` rows from `rows` (the
  // block's metadata converted at g = 0), in meta.low and meta.step.
  struct TokenMeta {
    std::vector<uint16_t> halves;
    std::vector<float> floats, low, step;
  };
  static constexpr size_t kMetaBlock = 1024;  // rows whose metadata is converted at once
  void token_group_meta(const uint8_t* rows, size_t count, size_t g, TokenMeta& meta) const;
  // Whether each channel group's levels start on a byte (the multi-query forms read them in place).
  bool levels_by_channel_group() const;
  // The levels of channels [first, first + count) as index rows into 0, 1, 2, ... (first * bits
  // a whole number of bytes), for the row kernels.
  simd::RowSource level_rows(const uint8_t* codes, size_t first, size_t count) const;
  // Whether channel groups are parts of the fused kernel (describe_row): q4_0 (4-bit levels, one
  // scale each, every group on a byte).
  bool attention_parts() const { return scheme_ == GroupScheme::kQ4_0 && levels_by_channel_group(); }
  // Channel group g's part: its levels as indices into level - center(), its scale the row factor.
  RowLayout::Part group_part(size_t g) const;
  GroupScheme scheme_;
  int bits_;
  size_t group_, value_bytes_, meta_offset_, code_bytes_;
};

}  // namespace kvsketch
