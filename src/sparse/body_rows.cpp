#include "sparse/body_rows.hpp"

#include <algorithm>

#include "codec/codec_base.hpp"
#include "core/require.hpp"
#include "simd/row_kernels.hpp"

namespace kvsketch {
namespace {

// One side (keys or values) of a view as gathered rows of the row kernels; false for codes.
bool plain_rows(const float* floats, const uint16_t* halves, size_t dim, const uint32_t* tokens, simd::RowSource& rows) {
  if (floats == nullptr && halves == nullptr) return false;
  rows.format = floats ? simd::RowFormat::kFloat : simd::RowFormat::kHalf;
  rows.data = floats ? reinterpret_cast<const uint8_t*>(floats) : reinterpret_cast<const uint8_t*>(halves);
  rows.stride = dim * (floats ? sizeof(float) : sizeof(uint16_t));
  rows.dim = dim;
  rows.indices = tokens;
  return true;
}

void check_side(const float* floats, const uint16_t* halves, const VectorCodec* codec, const CodeBuffer* codes,
                const CodeBuffer* const* pages, const BodyView& body, const char* side, const char* operation) {
  const int storages = (floats != nullptr) + (halves != nullptr) + (codes != nullptr) + (pages != nullptr) +
                       (codec != nullptr && codes == nullptr && pages == nullptr);
  require(storages == 1, "{}: the body's {} need exactly one storage (floats, fp16, codes or pages), got {}", operation,
          side, storages);
  if (codec == nullptr && codes == nullptr && pages == nullptr) return;
  require(codec != nullptr, "{}: the body's {} have codes without their codec", operation, side);
  require(codes != nullptr || pages != nullptr, "{}: the body's {} have a codec without codes", operation, side);
  require(codec->dim() == body.dim, "{}: the body's {} codec {} is for dimension {}, the body has {}", operation, side,
          codec->spec(), codec->dim(), body.dim);
  require(codec_base(*codec).reads_scattered_rows(),
          "{}: the body's {} codec {} encodes rows in groups of {}; selection reads single rows",
          operation, side, codec->spec(), codec->row_group());
  if (codes)
    require(codes->size() == body.tokens, "{}: the body's {} hold {} code rows for {} tokens", operation, side,
            codes->size(), body.tokens);
  else
    require(body.page_rows > 0, "{}: the body's {} are in pages of 0 rows", operation, side);
}

// Calls run(code rows, local rows (null: consecutive from `first`), first, count, offset) for each
// piece of body rows `tokens` (null: rows 0..n-1) lying in one code buffer, in order: offset is the
// piece's place among the n. `local` holds a piece's rows within its page.
template <typename Run>
void for_each_code_run(const BodyView& body, const CodeBuffer* codes, const CodeBuffer* const* pages,
                       const uint32_t* tokens, size_t n, std::vector<uint32_t>& local, const Run& run) {
  if (codes) return run(*codes, tokens, size_t{0}, n, size_t{0});
  const size_t rows = body.page_rows;
  for (size_t s = 0; s < n;) {
    const size_t row = body.first_row + (tokens ? tokens[s] : s), page = row / rows;
    if (!tokens) {
      const size_t count = std::min(n - s, (page + 1) * rows - row);
      run(*pages[page], nullptr, row - page * rows, count, s);
      s += count;
      continue;
    }
    local.clear();
    size_t e = s;
    for (; e < n && (body.first_row + tokens[e]) / rows == page; ++e)
      local.push_back(static_cast<uint32_t>(body.first_row + tokens[e] - page * rows));
    run(*pages[page], local.data(), size_t{0}, e - s, s);
    s = e;
  }
}

}  // namespace

void require_indexed_body(const BodyView& body, size_t tokens, size_t dim, const char* selector) {
  require(body.tokens == tokens && body.dim == dim, "{}: the body has {} tokens of dimension {}, the index {} of {}",
          selector, body.tokens, body.dim, tokens, dim);
}

void check_body(const BodyView& body, const char* operation) {
  check_side(body.keys, body.half_keys, body.key_codec, body.key_codes, body.key_pages, body, "keys", operation);
  check_side(body.values, body.half_values, body.value_codec, body.value_codes, body.value_pages, body, "values",
             operation);
}

void body_key_scores(const float* query, const BodyView& body, const uint32_t* tokens, size_t n, float scale,
                     float* out) {
  check_body(body, "key scores");
  if (n == 0) return;
  simd::RowSource rows;
  if (plain_rows(body.keys, body.half_keys, body.dim, tokens, rows)) return simd::row_scores(rows, n, query, 1, scale, out, n);
  const CodecBase& codec = codec_base(*body.key_codec);
  const auto prepared = codec.prepare(query);
  std::vector<uint32_t> local;
  for_each_code_run(body, body.key_codes, body.key_pages, tokens, n, local,
                    [&](const CodeBuffer& codes, const uint32_t* rows, size_t first, size_t count, size_t at) {
                      if (rows)
                        codec.scores_at(*prepared, codes, rows, count, out + at);
                      else
                        codec.scores(*prepared, codes, first, count, out + at);
                    });
  for (size_t s = 0; s < n; ++s) out[s] *= scale;
}

BodyValueSum::BodyValueSum(const BodyView& body)
    : body_(body), accumulator_(body.value_codec ? codec_base(*body.value_codec).accumulator_size() : body.dim, 0.0f) {
  check_body(body, "value sum");
}

void BodyValueSum::add(const uint32_t* tokens, const float* weights, size_t n) {
  if (n == 0) return;
  simd::RowSource rows;
  if (plain_rows(body_.values, body_.half_values, body_.dim, tokens, rows))
    return simd::row_weighted_sum(rows, n, weights, 1, n, accumulator_.data(), body_.dim);
  const CodecBase& codec = codec_base(*body_.value_codec);
  std::vector<uint32_t> local;
  for_each_code_run(body_, body_.value_codes, body_.value_pages, tokens, n, local,
                    [&](const CodeBuffer& codes, const uint32_t* rows, size_t first, size_t count, size_t at) {
                      if (rows)
                        codec.accumulate_partial_at(weights + at, codes, rows, count, accumulator_.data());
                      else
                        codec.accumulate_partial(weights + at, codes, first, count, accumulator_.data());
                    });
}

void BodyValueSum::scale(float factor) {
  for (float& value : accumulator_) value *= factor;
}

void BodyValueSum::finish(float* out) const {
  if (body_.value_codec == nullptr) {
    std::copy(accumulator_.begin(), accumulator_.end(), out);
    return;
  }
  std::fill(out, out + body_.dim, 0.0f);
  codec_base(*body_.value_codec).finish_accumulator(accumulator_.data(), out);
}

}  // namespace kvsketch
