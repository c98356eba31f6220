// Baselines measured next to the sketches at equal bytes: fp16 (2 bytes per value) and int8 with
// one symmetric fp32 scale per vector (max |x| / 127).
#pragma once
#include "codec/plain_query.hpp"
#include "codec/codec_base.hpp"
#include "simd/row_kernels.hpp"

namespace kvsketch {

class Fp16Codec final : public CodecBase {
 public:
  explicit Fp16Codec(size_t dim) : CodecBase(dim) {}
  std::string spec() const override { return "fp16"; }
  size_t code_bytes() const override { return 2 * dim(); }

 protected:
  void encode_rows(const float* x, size_t n, uint8_t* codes, size_t first_row) const override;
  std::unique_ptr<PreparedQuery> prepare_query(const float* q) const override;
  bool reprepare_query(const float* q, PreparedQuery& into) const override { return replain_query(q, dim(), into); }
  void score_rows(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const override;
  void accumulate_rows(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const override;
  void score_rows_multi(const PreparedQuery* const* queries, size_t heads, const uint8_t* codes, size_t n, float* out,
                        size_t stride, Arithmetic arithmetic) const override;
  void accumulate_rows_multi(const float* weights, size_t heads, size_t stride, const uint8_t* codes, size_t n,
                             float* accumulators, Arithmetic arithmetic) const override;
};

class Int8Codec final : public CodecBase {
 public:
  explicit Int8Codec(size_t dim) : CodecBase(dim) {}
  std::string spec() const override { return "int8"; }
  size_t code_bytes() const override { return dim() + 4; }

 protected:
  void encode_rows(const float* x, size_t n, uint8_t* codes, size_t first_row) const override;
  std::unique_ptr<PreparedQuery> prepare_query(const float* q) const override;
  bool reprepare_query(const float* q, PreparedQuery& into) const override { return replain_query(q, dim(), into); }
  void score_rows(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const override;
  void accumulate_rows(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const override;
  void score_rows_multi(const PreparedQuery* const* queries, size_t heads, const uint8_t* codes, size_t n, float* out,
                        size_t stride, Arithmetic arithmetic) const override;
  void accumulate_rows_multi(const float* weights, size_t heads, size_t stride, const uint8_t* codes, size_t n,
                             float* accumulators, Arithmetic arithmetic) const override;
  void decode_rows(const uint8_t* codes, size_t n, float* out) const override;

 private:
  simd::RowSource int8_rows(const uint8_t* codes) const;  // the int8 values of the rows from codes on
  void row_scales(const uint8_t* codes, size_t n, float* out) const;
};

}  // namespace kvsketch
