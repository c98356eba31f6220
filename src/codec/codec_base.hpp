// CodecBase: the one class every codec derives from, beneath the public VectorCodec interface. It
// implements the user-facing calls once (argument checks, parallel encode, the gathered reads of
// scattered rows) over the hooks each codec overrides, and holds what the library's own kernels
// call: the multi-query forms for the query heads of a GQA group, the fused decode-attention
// entry points, the accumulator domain, and the row layout (kvsketch/row_layout.hpp) through which
// the fused kernels and the quads packing read rows.
//
// The library builds every codec (make_codec) as a CodecBase; codec_base() refuses a VectorCodec
// derived elsewhere.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "kvsketch/codec.hpp"

namespace kvsketch {
struct AttentionParts;   // codec/attention_parts.hpp
class AttentionScratch;  // codec/attention_scratch.hpp

// Rows [first, first + rows) of a key and a value code buffer: one segment of a decode step's body
// (a range of one cache's body, or one page of a paged cache).
struct CodeSegment {
  const CodeBuffer* keys = nullptr;
  const CodeBuffer* values = nullptr;
  size_t first = 0, rows = 0;
};

class CodecBase : public VectorCodec {
 public:
  // VectorCodec's calls (codec.hpp), the same for every codec.
  void encode(const float* x, size_t n, CodeBuffer& out, const float* squared_norms = nullptr) const final;
  void decode(const CodeBuffer& codes, size_t first, size_t n, float* out) const final;
  size_t first_non_finite_row(const CodeBuffer& codes) const final;
  std::unique_ptr<PreparedQuery> prepare(const float* q) const final;
  void prepare(const float* q, std::unique_ptr<PreparedQuery>& prepared) const final;
  void scores(const PreparedQuery& q, const CodeBuffer& codes, size_t first, size_t n, float* out) const final;
  void accumulate(const float* weights, const CodeBuffer& codes, size_t first, size_t n, float* out) const final;

  // The same over scattered rows (a selection of tokens): out[s] = <q, x~_{rows[s]}> and
  // accumulator += sum_s weights[s] x~_{rows[s]}, for s < n. Needs a codec whose rows stand alone
  // (row_group() == 1) or rows in quads (QuadRowsCodec) of such a codec; rows out of range are refused.
  bool reads_scattered_rows() const { return scattered_reader() != nullptr; }
  void scores_at(const PreparedQuery& q, const CodeBuffer& codes, const uint32_t* rows, size_t n, float* out) const;
  void accumulate_partial_at(const float* weights, const CodeBuffer& codes, const uint32_t* rows, size_t n,
                             float* accumulator) const;

  // The weighted sum in two steps, so that partial sums (token ranges, threads) can be merged
  // before the one inverse transform: accumulate_partial adds into an accumulator of
  // accumulator_size() floats (zero-initialized by the caller); finish_accumulator adds its
  // original-domain value to out (dim floats).
  virtual size_t accumulator_size() const { return dim(); }
  void accumulate_partial(const float* weights, const CodeBuffer& codes, size_t first, size_t n,
                          float* accumulator) const;
  virtual void finish_accumulator(const float* accumulator, float* out) const;

  // The same for several queries at once (the query heads of a GQA group), each code row read and
  // decoded once: out[h * stride + i] = <q_h, x~_{first + i}>, and accumulators (heads x
  // accumulator_size()) += weights[h * stride + i] * x~_{first + i}.
  void scores_multi(const PreparedQuery* const* queries, size_t heads, const CodeBuffer& codes, size_t first,
                    size_t n, float* out, size_t stride, Arithmetic arithmetic = Arithmetic::kFloat) const;
  void accumulate_partial_multi(const float* weights, size_t heads, size_t stride, const CodeBuffer& codes,
                                size_t first, size_t n, float* accumulators,
                                Arithmetic arithmetic = Arithmetic::kFloat) const;

  // Decode attention over rows [first, first + n) in one pass, where this codec (keys) and
  // value_codec (values) have a fused kernel for the arithmetic (integer; TurboQuant mse codes and
  // their outlier split, simd::int_index_attention): per head max[h], sum[h] = the sum
  // of exp(score - max[h]) over the rows, and their weighted sum of values in value_codec's
  // accumulator domain at accumulators + h * value_codec.accumulator_size() (zero-initialized by
  // the caller). The scores are those of scores_multi. Returns false, with nothing written, where
  // there is no such kernel: scores_multi and accumulate_partial_multi then give the same pieces.
  bool attend_multi(const PreparedQuery* const* queries, size_t heads, const CodeBuffer& keys,
                    const CodecBase& value_codec, const CodeBuffer& values, size_t first, size_t n, float* max,
                    float* sum, float* accumulators, Arithmetic arithmetic) const;
  // The same over segments read one after another as one range (the pages of a sequence): the
  // kernel's per-query setup is done once for all of them. Each segment starts a block of the
  // integer kernels' weights. `memory` is what the call reuses from earlier calls (the library's
  // decode steps own one per task); null: the calling thread's own.
  bool attend_segments(const PreparedQuery* const* queries, size_t heads, const CodecBase& value_codec,
                       const CodeSegment* segments, size_t count, float* max, float* sum, float* accumulators,
                       Arithmetic arithmetic, AttentionScratch* memory = nullptr) const;

  // The layout's description of the rows from `codes` on as the fused kernel's parts, appended to
  // `parts`: as keys with the query heads, as values with the accumulators (head h's at
  // accumulators + h * stride). False where the layout has no such form.
  bool key_parts(const uint8_t* codes, const PreparedQuery* const* queries, size_t heads, AttentionParts& parts) const;
  bool value_parts(const uint8_t* codes, float* accumulators, size_t stride, AttentionParts& parts) const;
  const RowLayout& row_layout() const final;

  // The hooks each codec overrides, called by the functions above and by codecs that wrap others.

  // Encodes rows [0, n) of x into codes (n * code_bytes()); called on blocks, possibly in parallel.
  // Row i is row first_row + i of the caller's input: NaN and Inf must be refused naming it
  // (finite_norm or require_finite), where the row is read anyway, so it is read from memory once.
  virtual void encode_rows(const float* x, size_t n, uint8_t* codes, size_t first_row) const = 0;
  // encode_rows with the rows' squared norms at hand (see encode); by default unused.
  virtual void encode_rows_given(const float* x, const float* squared_norms, size_t n, uint8_t* codes,
                                 size_t first_row) const {
    (void)squared_norms;
    encode_rows(x, n, codes, first_row);
  }
  // Default: each row through accumulate_rows and finish_accumulator with weight 1.
  virtual void decode_rows(const uint8_t* codes, size_t n, float* out) const;
  virtual std::unique_ptr<PreparedQuery> prepare_query(const float* q) const = 0;
  // Refills `into` with q prepared, without allocating, where `into` is a query of this codec's
  // kind and size; false (the default) where it cannot, and prepare() then makes a new one.
  virtual bool reprepare_query(const float* q, PreparedQuery& into) const;
  virtual void score_rows(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const = 0;
  virtual void accumulate_rows(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const = 0;

  // Multi-query hooks. The defaults decode blocks of rows through decode_domain_rows where the
  // codec has it (then every query reads the same floats), and otherwise go one query at a time.
  virtual void score_rows_multi(const PreparedQuery* const* queries, size_t heads, const uint8_t* codes, size_t n,
                                float* out, size_t stride, Arithmetic arithmetic) const;
  virtual void accumulate_rows_multi(const float* weights, size_t heads, size_t stride, const uint8_t* codes,
                                     size_t n, float* accumulators, Arithmetic arithmetic) const;
  // The row's layout (kvsketch/row_layout.hpp), described once, on first use: the codecs with fused
  // kernel forms (TurboQuant, its splits and wrappers, q4_0) give their parts, and every codec its
  // fields; by default the whole row as one field. A layout never changes with calibration.
  virtual void describe_row(RowLayout& layout) const;
  // Where the layout has keys: a prepared query in the keys' domain (layout.key_domain floats), and
  // its shift (layout.key_shift: centred keys' <q, mean>).
  virtual void key_domain(const PreparedQuery& q, float* out) const;
  virtual float key_shift(const PreparedQuery& q) const;
  // Optional: rows [0, n) in the accumulator domain, row i standing for row_scale[i] * rows[i]
  // (rows: n x accumulator_size() floats), such that the score of q is row_scale[i] *
  // <domain_query(q), rows[i]>. Returns false where the codec has no such form.
  virtual bool decode_domain_rows(const uint8_t* codes, size_t n, float* rows, float* row_scale) const;
  // The prepared query as accumulator_size() floats (used with decode_domain_rows).
  virtual const float* domain_query(const PreparedQuery& q) const;

  // Scattered rows (scores_at, accumulate_partial_at): the codec whose row functions read them once
  // gather_rows has copied them out as plain rows, one after another; null where rows are encoded
  // in groups. By default this codec where its rows stand alone, and a copy of each row.
  virtual const CodecBase* scattered_reader() const { return row_group() == 1 ? this : nullptr; }
  virtual void gather_rows(const CodeBuffer& codes, const uint32_t* rows, size_t n, uint8_t* out) const;

 protected:
  explicit CodecBase(size_t dim) : VectorCodec(dim) {}
  // One query through the multi-query hooks, as one head in float arithmetic: the single-query forms
  // of the codecs whose multi-query kernels are also their fastest one-query path.
  void score_rows_one_head(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const;
  void accumulate_rows_one_head(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const;
  // ||row||, refusing NaN, Inf and norms beyond the float range with an error naming the row;
  // from *squared_norm where given (sum_of_squares(row)), else computed.
  float finite_norm(const float* row, size_t row_index, const float* squared_norm = nullptr) const;

 private:
  void check_buffer(const CodeBuffer& codes, const char* operation) const;
  void check_range(const CodeBuffer& codes, size_t first, size_t n, const char* operation) const;
  // Every query head non-null and prepared by this codec.
  void check_queries(const PreparedQuery* const* queries, size_t heads, const char* operation) const;
  void check_rows(const CodeBuffer& codes, const uint32_t* rows, size_t n, const char* operation) const;

  // Scattered rows in blocks: run(block, first, count) for rows[first, first + count), gathered.
  template <class Run>
  void for_each_gathered_block(const CodeBuffer& codes, const uint32_t* rows, size_t n, const Run& run) const;

  mutable std::once_flag layout_once_;
  mutable RowLayout layout_;
};

// The library's side of a codec; an Error for a VectorCodec the library did not build.
const CodecBase& codec_base(const VectorCodec& codec);
CodecBase& codec_base(VectorCodec& codec);
std::unique_ptr<CodecBase> codec_base(std::unique_ptr<VectorCodec> codec);

}  // namespace kvsketch
