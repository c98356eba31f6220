#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <vector>

#include "codec/spec_of.hpp"
#include "codec/codec_base.hpp"
#include "core/require.hpp"
#include "simd/kernels.hpp"
#include "simd/quad_rows.hpp"

namespace kvsketch {

void require_finite(const float* x, size_t rows, size_t cols, const char* what, size_t first_row) {
  // Fast scan: NaN and Inf have the largest magnitude bits, from an exponent of all ones. Locate
  // it only if present.
  if (simd::largest_magnitude_bits(x, rows * cols) < 0x7F800000u) return;
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) {
      const float value = x[r * cols + c];
      if (!std::isfinite(value))
        throw Error(fmt::format("{}: row {} column {} is {}; inputs must be finite", what, first_row + r, c,
                                std::isnan(value) ? "NaN" : (value > 0 ? "+Inf" : "-Inf")));
    }
}

void require_finite_rows(const float* x, size_t rows, size_t cols, const char* what) {
  require_finite(x, rows, cols, what);
  for (size_t r = 0; r < rows; ++r)
    require(std::isfinite(simd::sum_of_squares(x + r * cols, cols)),
            "{}: row {} has a norm beyond the float range (its squares overflow)", what, r);
}

float CodecBase::finite_norm(const float* row, size_t row_index, const float* squared_norm) const {
  const float squares = squared_norm ? *squared_norm : simd::sum_of_squares(row, dim());
  if (std::isfinite(squares)) return std::sqrt(squares);
  require_finite(row, 1, dim(), "encode", row_index);  // NaN or Inf: names the column
  double sum = 0.0;  // finite values whose squares overflow
  for (size_t j = 0; j < dim(); ++j) sum += static_cast<double>(row[j]) * row[j];
  const double norm = std::sqrt(sum);
  require(norm <= std::numeric_limits<float>::max(), "encode: row {} has norm {:g}, beyond the float range",
          row_index, norm);
  return static_cast<float>(norm);
}

void VectorCodec::calibrate(const float*, size_t) {}

void VectorCodec::set_calibration(const std::vector<uint8_t>& state) {
  require(state.empty(), "codec {}: has no calibration, got a state of {} bytes", SpecOf{*this}, state.size());
}

void CodecBase::check_buffer(const CodeBuffer& codes, const char* operation) const {
  require(codes.code_bytes() == code_bytes(), "{}: buffer holds codes of {} bytes but codec {} writes {} bytes",
          operation, codes.code_bytes(), SpecOf{*this}, code_bytes());
}

void CodecBase::check_range(const CodeBuffer& codes, size_t first, size_t n, const char* operation) const {
  check_buffer(codes, operation);
  require(first <= codes.size() && n <= codes.size() - first,
          "{}: rows [{}, {}) out of range; the buffer holds {} rows", operation, first, first + n, codes.size());
  require(first % row_group() == 0 && n % row_group() == 0,
          "{}: rows [{}, {}) do not start and end on a group of {} rows, as codec {} needs", operation, first,
          first + n, row_group(), SpecOf{*this});
}

void CodecBase::encode(const float* x, size_t n, CodeBuffer& out, const float* squared_norms) const {
  require(out.code_bytes() == code_bytes(), "encode: buffer holds codes of {} bytes but codec {} writes {} bytes",
          out.code_bytes(), SpecOf{*this}, code_bytes());
  if (n == 0) return;
  require(x != nullptr, "encode: input pointer is null for {} rows", n);
  require(n % row_group() == 0 && out.size() % row_group() == 0,
          "encode: codec {} encodes whole groups of {} rows; got {} rows after {}", SpecOf{*this}, row_group(), n,
          out.size());
  const size_t start = out.size();
  out.resize(start + n);
  uint8_t* codes = out.row(start);
  const size_t block = (64 + row_group() - 1) / row_group() * row_group();
  const long blocks = static_cast<long>((n + block - 1) / block);
  // Rows are independent and each is encoded by the same code path: the bytes do not depend on
  // the number of threads. An exception (a NaN, a norm beyond fp16) may not leave a parallel
  // region: keep the one of the first failing block, so that the error does not depend on the
  // threads either, drop the appended rows and rethrow: a refused encode changes nothing.
  std::exception_ptr failure;
  long failed_block = blocks;
#pragma omp parallel for schedule(static) if (n >= 2 * block)
  for (long b = 0; b < blocks; ++b) {
    const size_t row = static_cast<size_t>(b) * block;
    const size_t count = std::min(block, n - row);
    try {
      encode_rows_given(x + row * dim(), squared_norms ? squared_norms + row : nullptr, count,
                        codes + row * code_bytes(), row);
    } catch (...) {
#pragma omp critical(kvsketch_encode_failure)
      if (b < failed_block) {
        failed_block = b;
        failure = std::current_exception();
      }
    }
  }
  if (failure) {
    out.resize(start);
    std::rethrow_exception(failure);
  }
}

void CodecBase::decode(const CodeBuffer& codes, size_t first, size_t n, float* out) const {
  check_range(codes, first, n, "decode");
  if (n) decode_rows(codes.row(first), n, out);
}

size_t CodecBase::first_non_finite_row(const CodeBuffer& codes) const {
  const size_t group = row_group(), chunk = group * std::max<size_t>(1, 256 / group), rows = codes.size();
  std::vector<float> decoded(chunk * dim());
  for (size_t first = 0; first < rows; first += chunk) {
    const size_t n = std::min(chunk, rows - first);
    decode(codes, first, n, decoded.data());
    for (size_t i = 0; i < n * dim(); ++i)
      if (!std::isfinite(decoded[i])) return first + i / dim();
  }
  return rows;
}

std::unique_ptr<PreparedQuery> CodecBase::prepare(const float* q) const {
  require(q != nullptr, "prepare: query pointer is null");
  require_finite(q, 1, dim(), "prepare (query)");
  auto prepared = prepare_query(q);
  prepared->owner = this;
  return prepared;
}

void CodecBase::prepare(const float* q, std::unique_ptr<PreparedQuery>& prepared) const {
  require(q != nullptr, "prepare: query pointer is null");
  require_finite(q, 1, dim(), "prepare (query)");
  if (prepared == nullptr || !reprepare_query(q, *prepared)) prepared = prepare_query(q);
  prepared->owner = this;
}

bool CodecBase::reprepare_query(const float*, PreparedQuery&) const { return false; }

void CodecBase::scores(const PreparedQuery& q, const CodeBuffer& codes, size_t first, size_t n, float* out) const {
  require(q.owner == this, "scores: the query was prepared by a different codec than {}", SpecOf{*this});
  check_range(codes, first, n, "scores");
  if (n) score_rows(q, codes.row(first), n, out);
}

void CodecBase::accumulate_partial(const float* weights, const CodeBuffer& codes, size_t first, size_t n,
                                     float* accumulator) const {
  check_range(codes, first, n, "accumulate");
  if (n) accumulate_rows(weights, codes.row(first), n, accumulator);
}

void CodecBase::check_rows(const CodeBuffer& codes, const uint32_t* rows, size_t n, const char* operation) const {
  check_buffer(codes, operation);
  require(reads_scattered_rows(),
          "{}: codec {} encodes rows in groups of {}; scattered rows need rows that stand alone", operation,
          SpecOf{*this}, row_group());
  for (size_t s = 0; s < n; ++s)
    require(rows[s] < codes.size(), "{}: row {} out of range; the buffer holds {} rows", operation, rows[s],
            codes.size());
}

namespace {
// Scattered code rows: each fetched this many rows before it is read.
constexpr size_t kRowsAhead = 8;
// and copied together this many at a time, so that the kernels' setup (tables, scratch, block
// metadata) is paid once per block rather than once per row.
constexpr size_t kGatheredRows = 256;

}  // namespace

void CodecBase::gather_rows(const CodeBuffer& codes, const uint32_t* rows, size_t n, uint8_t* out) const {
  const size_t bytes = codes.code_bytes();
  for (size_t s = 0; s < n; ++s) {
    if (s + kRowsAhead < n) simd::prefetch_bytes(codes.row(rows[s + kRowsAhead]), bytes);
    std::memcpy(out + s * bytes, codes.row(rows[s]), bytes);
  }
}

template <class Run>
void CodecBase::for_each_gathered_block(const CodeBuffer& codes, const uint32_t* rows, size_t n,
                                          const Run& run) const {
  std::vector<uint8_t> block(std::min(n, kGatheredRows) * codes.code_bytes());
  for (size_t first = 0; first < n; first += kGatheredRows) {
    const size_t count = std::min(kGatheredRows, n - first);
    gather_rows(codes, rows + first, count, block.data());
    run(block.data(), first, count);
  }
}

void CodecBase::scores_at(const PreparedQuery& q, const CodeBuffer& codes, const uint32_t* rows, size_t n,
                            float* out) const {
  require(q.owner == this, "scores: the query was prepared by a different codec than {}", SpecOf{*this});
  check_rows(codes, rows, n, "scores");
  for_each_gathered_block(codes, rows, n, [&](const uint8_t* block, size_t first, size_t count) {
    scattered_reader()->score_rows(q, block, count, out + first);
  });
}

void CodecBase::accumulate_partial_at(const float* weights, const CodeBuffer& codes, const uint32_t* rows, size_t n,
                                        float* accumulator) const {
  check_rows(codes, rows, n, "accumulate");
  for_each_gathered_block(codes, rows, n, [&](const uint8_t* block, size_t first, size_t count) {
    scattered_reader()->accumulate_rows(weights + first, block, count, accumulator);
  });
}

void CodecBase::decode_rows(const uint8_t* codes, size_t n, float* out) const {
  std::vector<float> accumulator(accumulator_size());
  const float weight = 1.0f;
  for (size_t i = 0; i < n; ++i) {
    std::fill(accumulator.begin(), accumulator.end(), 0.0f);
    accumulate_rows(&weight, codes + i * code_bytes(), 1, accumulator.data());
    std::fill(out + i * dim(), out + (i + 1) * dim(), 0.0f);
    finish_accumulator(accumulator.data(), out + i * dim());
  }
}

void CodecBase::finish_accumulator(const float* accumulator, float* out) const {
  for (size_t j = 0; j < dim(); ++j) out[j] += accumulator[j];
}

void CodecBase::accumulate(const float* weights, const CodeBuffer& codes, size_t first, size_t n, float* out) const {
  std::vector<float> accumulator(accumulator_size(), 0.0f);
  accumulate_partial(weights, codes, first, n, accumulator.data());
  finish_accumulator(accumulator.data(), out);
}

namespace {
[[noreturn]] void not_the_librarys(const VectorCodec& codec) {
  throw Error(fmt::format("codec {}: not one the library built (make_codec builds every codec)", codec.spec()));
}
}  // namespace

const CodecBase& codec_base(const VectorCodec& codec) {
  const auto* base = dynamic_cast<const CodecBase*>(&codec);
  if (base == nullptr) not_the_librarys(codec);
  return *base;
}

CodecBase& codec_base(VectorCodec& codec) {
  auto* base = dynamic_cast<CodecBase*>(&codec);
  if (base == nullptr) not_the_librarys(codec);
  return *base;
}

std::unique_ptr<CodecBase> codec_base(std::unique_ptr<VectorCodec> codec) {
  CodecBase& base = codec_base(*codec);
  codec.release();
  return std::unique_ptr<CodecBase>(&base);
}

}  // namespace kvsketch
