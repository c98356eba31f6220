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
// split:SPEC@N+SPEC@N | center:SPEC | rotate:SPEC | kivi_k, kivi_v, q4_0, each with optional
// parameters. code_bytes() is the exact size of one encoded vector, norms included.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvsketch/limits.hpp"
#include "kvsketch/row_layout.hpp"

// The library is built with hidden visibility: what this header declares is its exported API.
#pragma GCC visibility push(default)
namespace kvsketch {

// Encoded rows of one codec: rows x code_bytes bytes, contiguous; row i at row(i), except in a
// cache whose codecs pack their rows four by four (kv_policy.hpp): read those
// rows through the cache's codecs.
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

// A codec: encodes vectors of dim() floats into rows of code_bytes() bytes and answers inner
// products and weighted sums straight from those rows. Built by make_codec; the library's own
// kernels reach the rest of each codec (multi-query and fused attention forms) internally.
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
  virtual void encode(const float* x, size_t n, CodeBuffer& out, const float* squared_norms = nullptr) const = 0;
  // Writes rows [first, first + n) decoded, row-major n x dim.
  virtual void decode(const CodeBuffer& codes, size_t first, size_t n, float* out) const = 0;
  // The first row of `codes` that decodes to a NaN or Inf (a norm or scale no encoder writes, as a
  // corrupted file may hold), or codes.size() when every row is finite. Loaders refuse such rows.
  virtual size_t first_non_finite_row(const CodeBuffer& codes) const = 0;
  // Prepares q (dim floats) for scores().
  virtual std::unique_ptr<PreparedQuery> prepare(const float* q) const = 0;
  // The same into `prepared`, refilling the query already there in place where this codec can (one
  // it prepared before, or another codec of the same kind and size): decode steps reuse their
  // queries, so that a warm step allocates nothing.
  virtual void prepare(const float* q, std::unique_ptr<PreparedQuery>& prepared) const = 0;
  // out[i] = <q, x~_{first + i}> for i < n.
  virtual void scores(const PreparedQuery& q, const CodeBuffer& codes, size_t first, size_t n, float* out) const = 0;
  // out (dim floats) += sum_i weights[i] * x~_{first + i}.
  virtual void accumulate(const float* weights, const CodeBuffer& codes, size_t first, size_t n,
                          float* out) const = 0;
  // What a row holds, as the fused decode-attention kernels read it (row_layout.hpp): data only,
  // for kernels written elsewhere. has_keys and has_values say whether the codec has such a form.
  // The layout (its tables too) lives as long as the codec.
  virtual const RowLayout& row_layout() const = 0;

 protected:
  // The library's codecs derive from VectorCodec; the library takes only codecs it built
  // (make_codec) and refuses others with an Error.
  explicit VectorCodec(size_t dim) : dim_(dim) {}

 private:
  size_t dim_;
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
