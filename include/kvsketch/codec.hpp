// VectorCodec: the one interface every compression method implements (TurboQuant mse/prod, QJL,
// int8, fp16). Encode once; answer inner products and weighted sums straight from the codes.
//
//   auto codec = kvsketch::make_codec("tq_prod:b=3", 128, /*seed=*/7);
//   kvsketch::CodeBuffer codes = codec->make_buffer();
//   codec->encode(keys, n, codes);                     // appends n rows
//   auto query = codec->prepare(q);                    // rotate/sketch q once, build tables
//   codec->scores(*query, codes, 0, n, logits);        // <q, x~_i> for every row
//   codec->accumulate(weights, codes, 0, n, output);   // output += sum_i w_i x~_i
//
// Spec strings (see make_codec): fp16 | int8 | tq_mse:b=B | tq_prod:b=B | qjl:m=M |
// split:SPEC@N+SPEC@N | center:SPEC | quads:SPEC | kivi_k, kivi_v, q4_0, each with optional
// parameters. code_bytes() is the exact size of one encoded vector, norms included.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvsketch/limits.hpp"

namespace kvsketch {
// Internal wrappers that VectorCodec befriends; declared here, outside the exported region below,
// so that the shared library does not export them.
class CenteredCodec;
class QuadRowsCodec;
class RotatedCodec;
}  // namespace kvsketch

// The library is built with hidden visibility: what this header declares is its exported API.
#pragma GCC visibility push(default)
namespace kvsketch {
namespace simd {
struct QuadField;  // simd/quad_rows.hpp (internal)
}

// Encoded rows of one codec: rows x code_bytes bytes, contiguous; row i at row(i), except where the
// codec stores its rows in quads (quads:SPEC), four rows interleaved from row(4g) on.
class CodeBuffer {
 public:
  explicit CodeBuffer(size_t code_bytes = 0) : code_bytes_(code_bytes) {}
  size_t code_bytes() const { return code_bytes_; }
  size_t size() const { return code_bytes_ ? bytes_.size() / code_bytes_ : 0; }
  size_t bytes() const { return bytes_.size(); }
  size_t allocated_bytes() const { return bytes_.capacity(); }
  void shrink_to_fit() { bytes_.shrink_to_fit(); }
  const uint8_t* row(size_t i) const { return bytes_.data() + i * code_bytes_; }
  uint8_t* row(size_t i) { return bytes_.data() + i * code_bytes_; }
  const std::vector<uint8_t>& data() const { return bytes_; }
  std::vector<uint8_t>& data() { return bytes_; }
  void resize(size_t rows) { bytes_.resize(rows * code_bytes_); }
  void clear() { bytes_.clear(); }

 private:
  size_t code_bytes_;
  std::vector<uint8_t> bytes_;
};

class VectorCodec;
struct AttentionParts;
class AttentionScratch;  // codec/attention_scratch.hpp (internal)

// Rows [first, first + rows) of a key and a value code buffer: one segment of a decode step's body
// (a range of one cache's body, or one page of a paged cache).
struct CodeSegment {
  const CodeBuffer* keys = nullptr;
  const CodeBuffer* values = nullptr;
  size_t first = 0, rows = 0;
};  // codec/attention_parts.hpp (internal)

// How the multi-query kernels multiply. kInteger: where a codec has integer kernels (TurboQuant's
// scalar stage, b <= 4, and its QJL signs as 1-bit indices into {-1, +1}) the query heads and the
// table are rounded to bytes and the weights to bytes per block of 64 rows, products are summed
// exactly in integers (several times fewer instructions; the same bits on every machine; scores
// within about 1% of the float ones).
// Decode attention uses it; search and the tests of the codecs' own estimates use kFloat.
enum class Arithmetic { kFloat, kInteger };

// A query transformed for one codec (rotated, sketched, look-up tables built).
class PreparedQuery {
 public:
  virtual ~PreparedQuery() = default;
  const VectorCodec* owner = nullptr;
};

class VectorCodec {
 public:
  virtual ~VectorCodec() = default;

  virtual std::string spec() const = 0;   // canonical spec string, all parameters spelled out
  size_t dim() const { return dim_; }
  virtual size_t code_bytes() const = 0;  // exact bytes per vector, metadata included
  CodeBuffer make_buffer() const { return CodeBuffer(code_bytes()); }
  // Whether <q, x~> is an unbiased estimate of <q, x> (TurboQuant_prod, QJL).
  virtual bool unbiased_inner_products() const { return false; }

  // Rows are encoded and read in whole groups of this many (KIVI keys share per-channel scales
  // over a group of tokens); 1 for codecs whose rows stand alone. encode() takes, and every
  // row range must be, a multiple of it.
  virtual size_t row_group() const { return 1; }
  // Memory of the codec's own fixed parts: rotations, sketches, a basis (not its codes). A KV cache
  // holds one codec per head and role, and bounds their total (kv_cache.hpp).
  virtual size_t state_bytes() const { return 0; }

  // Data-dependent setup (outlier channels of QJL and of a channel split); a no-op for
  // data-oblivious codecs. A KVCache calibrates such codecs on the first tokens of a sequence.
  virtual void calibrate(const float* x, size_t n);
  virtual bool calibrated_by_data() const { return false; }
  // What calibrate() chose, as bytes (counted by a cache's bytes(), saved with it), and its
  // restoration; set_calibration refuses a state of the wrong size or with invalid contents.
  virtual std::vector<uint8_t> calibration() const { return {}; }
  virtual void set_calibration(const std::vector<uint8_t>& state);

  // Appends n rows (row-major n x dim). Throws Error naming row and column for NaN or Inf.
  // squared_norms (optional): simd::sum_of_squares of each row, exactly that value, from a caller
  // that computed it while writing the rows (an index centring them); codecs that normalize then
  // do not read each row once more for it.
  void encode(const float* x, size_t n, CodeBuffer& out, const float* squared_norms = nullptr) const;
  // Writes rows [first, first + n) decoded, row-major n x dim.
  void decode(const CodeBuffer& codes, size_t first, size_t n, float* out) const;
  // The first row of `codes` that decodes to a NaN or Inf (a norm or scale no encoder writes, as a
  // corrupted file may hold), or codes.size() when every row is finite. Loaders refuse such rows.
  size_t first_non_finite_row(const CodeBuffer& codes) const;
  // Prepares q (dim floats) for scores().
  std::unique_ptr<PreparedQuery> prepare(const float* q) const;
  // The same into `prepared`, refilling the query already there in place where this codec can (one
  // it prepared before, or another codec of the same kind and size): decode steps reuse their
  // queries, so that a warm step allocates nothing.
  void prepare(const float* q, std::unique_ptr<PreparedQuery>& prepared) const;
  // out[i] = <q, x~_{first + i}> for i < n.
  void scores(const PreparedQuery& q, const CodeBuffer& codes, size_t first, size_t n, float* out) const;
  // out (dim floats) += sum_i weights[i] * x~_{first + i}.
  void accumulate(const float* weights, const CodeBuffer& codes, size_t first, size_t n, float* out) const;

  // The same over scattered rows (a selection of tokens): out[s] = <q, x~_{rows[s]}> and
  // accumulator += sum_s weights[s] x~_{rows[s]}, for s < n. Needs a codec whose rows stand alone
  // (row_group() == 1) or rows in quads (quads:SPEC) of such a codec; rows out of range are refused.
  bool reads_scattered_rows() const { return scattered_reader() != nullptr; }
  void scores_at(const PreparedQuery& q, const CodeBuffer& codes, const uint32_t* rows, size_t n, float* out) const;
  void accumulate_partial_at(const float* weights, const CodeBuffer& codes, const uint32_t* rows, size_t n,
                             float* accumulator) const;

  // The same weighted sum in two steps, so that partial sums (token ranges, threads) can be merged
  // before the one inverse transform: accumulate_partial adds into an accumulator of
  // accumulator_size() floats (zero-initialized by the caller); finish_accumulator adds its
  // original-domain value to out (dim floats).
  virtual size_t accumulator_size() const { return dim_; }
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
                    const VectorCodec& value_codec, const CodeBuffer& values, size_t first, size_t n, float* max,
                    float* sum, float* accumulators, Arithmetic arithmetic) const;
  // The same over segments read one after another as one range (the pages of a sequence): the
  // kernel's per-query setup is done once for all of them. Each segment starts a block of the
  // integer kernels' weights. `memory` is what the call reuses from earlier calls (the library's
  // decode steps own one per task); null: the calling thread's own.
  bool attend_segments(const PreparedQuery* const* queries, size_t heads, const VectorCodec& value_codec,
                       const CodeSegment* segments, size_t count, float* max, float* sum, float* accumulators,
                       Arithmetic arithmetic, AttentionScratch* memory = nullptr) const;

 protected:
  explicit VectorCodec(size_t dim) : dim_(dim) {}
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
  // ||row||, refusing NaN, Inf and norms beyond the float range with an error naming the row;
  // from *squared_norm where given (sum_of_squares(row)), else computed.
  float finite_norm(const float* row, size_t row_index, const float* squared_norm = nullptr) const;
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
  // One query through the multi-query hooks, as one head in float arithmetic: the single-query forms
  // of the codecs whose multi-query kernels are also their fastest one-query path.
  void score_rows_one_head(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const;
  void accumulate_rows_one_head(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const;
  // Optional, for attend_multi: rows of codes from `codes` on as parts of b-bit indices for the
  // fused kernel, appended to `parts`: as keys with the query heads, as values with the
  // accumulators (head h's at accumulators + h * stride). False where the codec has no such form.
  virtual bool key_parts(const uint8_t* codes, const PreparedQuery* const* queries, size_t heads,
                         AttentionParts& parts) const;
  virtual bool value_parts(const uint8_t* codes, float* accumulators, size_t stride, AttentionParts& parts) const;
  // Optional: rows [0, n) in the accumulator domain, row i standing for row_scale[i] * rows[i]
  // (rows: n x accumulator_size() floats), such that the score of q is row_scale[i] *
  // <domain_query(q), rows[i]>. Returns false where the codec has no such form.
  virtual bool decode_domain_rows(const uint8_t* codes, size_t n, float* rows, float* row_scale) const;
  // The prepared query as accumulator_size() floats (used with decode_domain_rows).
  virtual const float* domain_query(const PreparedQuery& q) const;

  // The fields of a code row as rows in quads cut them (simd/quad_rows.hpp), each placed at
  // `offset` plus its place in the row, appended to `fields`; together they cover the row once. By
  // default the whole row as one chunk (its quads are then four plain rows); codecs with kernels
  // that read quads give their b-bit codes in chunks of b bytes.
  virtual void row_fields(size_t offset, std::vector<simd::QuadField>& fields) const;
  // Scattered rows (scores_at, accumulate_partial_at): the codec whose row functions read them once
  // gather_rows has copied them out as plain rows, one after another; null where rows are encoded
  // in groups. By default this codec where its rows stand alone, and a copy of each row.
  virtual const VectorCodec* scattered_reader() const { return row_group() == 1 ? this : nullptr; }
  virtual void gather_rows(const CodeBuffer& codes, const uint32_t* rows, size_t n, uint8_t* out) const;

 private:
  void check_buffer(const CodeBuffer& codes, const char* operation) const;
  void check_range(const CodeBuffer& codes, size_t first, size_t n, const char* operation) const;
  // Every query head non-null and prepared by this codec.
  void check_queries(const PreparedQuery* const* queries, size_t heads, const char* operation) const;
  void check_rows(const CodeBuffer& codes, const uint32_t* rows, size_t n, const char* operation) const;
  size_t dim_;

  // Scattered rows in blocks: run(block, first, count) for rows[first, first + count), gathered.
  template <class Run>
  void for_each_gathered_block(const CodeBuffer& codes, const uint32_t* rows, size_t n, const Run& run) const;

  friend class CenteredCodec;   // wrap any codec and call its row functions
  friend class QuadRowsCodec;
  friend class RotatedCodec;
};

// Builds a codec from a spec string for vectors of `dim` floats (1..kMaxDim). Unknown names or
// parameters, and values out of range, throw Error listing what is valid (see codec_spec_help()).
std::unique_ptr<VectorCodec> make_codec(const std::string& spec, size_t dim, uint64_t seed = 0);
std::string codec_spec_help();

// Throws Error naming the first row and column that is NaN or Inf.
void require_finite(const float* x, size_t rows, size_t cols, const char* what, size_t first_row = 0);
// require_finite, and every row's sum of squares finite too (finite coordinates up to 3.4e38 may
// overflow it, and the scores and softmax of queries or keys with it, to NaN); throws naming the row.
void require_finite_rows(const float* x, size_t rows, size_t cols, const char* what);

}  // namespace kvsketch
#pragma GCC visibility pop
