// QuadRowsCodec: a codec's rows stored in quads (simd/quad_rows.hpp), four rows interleaved chunk
// by chunk as its row_fields() cut them: the packing a cache chooses for its blocks on CPUs whose
// fused attention kernel reads them so (cache/row_packing.hpp). The same codes in the same bytes,
// so the same results, and the same spec(): the packing is not part of a codec's spec. What
// changes is how the fused kernel reads them: on AVX3_DL one 32-byte load holds 16 coordinates of
// four rows of TurboQuant's b-bit codes, and four rows' norms come in one 8-byte load (a large part
// of a tq_mse:b=3 decode step there). Other targets copy the rows back, as do the generic paths
// here (scores, weighted sums, decode). Rows are encoded and read in whole quads (row_group() is a
// multiple of 4); scattered rows are copied out one by one and read by the inner codec.
#pragma once
#include <memory>
#include <vector>

#include "core/kernel_memory.hpp"
#include "codec/codec_base.hpp"
#include "simd/quad_rows.hpp"

namespace kvsketch {

class QuadRowsCodec final : public CodecBase {
 public:
  explicit QuadRowsCodec(std::unique_ptr<VectorCodec> inner);
  std::string spec() const override { return inner_->spec(); }
  size_t code_bytes() const override { return inner_->code_bytes(); }
  size_t state_bytes() const override { return inner_->state_bytes(); }
  size_t row_group() const override;
  bool unbiased_inner_products() const override { return inner_->unbiased_inner_products(); }
  size_t accumulator_size() const override { return inner_->accumulator_size(); }
  void finish_accumulator(const float* accumulator, float* out) const override {
    inner_->finish_accumulator(accumulator, out);
  }

  void calibrate(const float* x, size_t n) override { inner_->calibrate(x, n); }
  bool calibrated_by_data() const override { return inner_->calibrated_by_data(); }
  std::vector<uint8_t> calibration() const override { return inner_->calibration(); }
  void set_calibration(const std::vector<uint8_t>& state) override { inner_->set_calibration(state); }
  const CodecBase& inner() const { return *inner_; }
  // Whether quads of `codec`'s rows differ from its plain rows (codecs that cut their rows into
  // fields; the others' quads are four plain rows).
  static bool rearranges(const VectorCodec& codec);
  // Whether the fused attention kernel (attend_multi) takes these rows as keys (or values) and reads
  // all their parts in place on this CPU; where it does not, every read copies the rows back first.
  bool read_in_place(bool as_keys) const;
  const simd::QuadLayout& layout() const { return layout_; }

 protected:
  void encode_rows(const float* x, size_t n, uint8_t* codes, size_t first_row) const override {
    encode_rows_given(x, nullptr, n, codes, first_row);
  }
  void encode_rows_given(const float* x, const float* squared_norms, size_t n, uint8_t* codes,
                         size_t first_row) const override;
  void decode_rows(const uint8_t* codes, size_t n, float* out) const override;
  // The inner codec's query (prepare() marks it as this codec's).
  std::unique_ptr<PreparedQuery> prepare_query(const float* q) const override { return inner_->prepare_query(q); }
  bool reprepare_query(const float* q, PreparedQuery& into) const override {
    return inner_->reprepare_query(q, into);
  }
  void score_rows(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const override;
  void accumulate_rows(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const override;
  void score_rows_multi(const PreparedQuery* const* queries, size_t heads, const uint8_t* codes, size_t n, float* out,
                        size_t stride, Arithmetic arithmetic) const override;
  void accumulate_rows_multi(const float* weights, size_t heads, size_t stride, const uint8_t* codes, size_t n,
                             float* accumulators, Arithmetic arithmetic) const override;
  // The inner codec's layout, its rows in quads.
  void describe_row(RowLayout& layout) const override {
    layout = inner_->row_layout();
    layout.quads = true;
  }
  void key_domain(const PreparedQuery& q, float* out) const override { inner_->key_domain(q, out); }
  float key_shift(const PreparedQuery& q) const override { return inner_->key_shift(q); }
  const CodecBase* scattered_reader() const override;
  void gather_rows(const CodeBuffer& codes, const uint32_t* rows, size_t n, uint8_t* out) const override;

 private:
  // Rows [0, n) at codes as plain rows. The weighted sums copy their whole range: a sum may depend
  // on how the range is cut (centred codes add up the weights over it).
  KernelVector<uint8_t> plain_rows(const uint8_t* codes, size_t n) const;
  // run(plain, first, count): rows [first, first + count) of the n rows at codes, as plain rows.
  template <class Run>
  void for_each_plain_block(const uint8_t* codes, size_t n, const Run& run) const;
  // The inner codec's fields, checked to cover its rows once.
  static simd::QuadLayout layout_of(const CodecBase& inner);
  // Whether the fused kernel reads this part's indices in quads on this CPU.
  static bool reads_in_place(const RowLayout::Part& part);

  std::unique_ptr<CodecBase> inner_;
  simd::QuadLayout layout_;
};

}  // namespace kvsketch
