#include "sparse/body_rows.hpp"

#include <algorithm>

#include "kvsketch/codec.hpp"
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
                const BodyView& body, const char* side, const char* operation) {
  const int storages = (floats != nullptr) + (halves != nullptr) + (codec != nullptr || codes != nullptr);
  require(storages == 1, "{}: the body's {} need exactly one storage (floats, fp16 or codes), got {}", operation, side,
          storages);
  if (codec == nullptr && codes == nullptr) return;
  require(codec != nullptr && codes != nullptr, "{}: the body's {} have codes without their codec or a codec without codes",
          operation, side);
  require(codec->dim() == body.dim, "{}: the body's {} codec {} is for dimension {}, the body has {}", operation, side,
          codec->spec(), codec->dim(), body.dim);
  require(codec->reads_scattered_rows(),
          "{}: the body's {} codec {} encodes rows in groups of {}; selection reads single rows",
          operation, side, codec->spec(), codec->row_group());
  require(codes->size() == body.tokens, "{}: the body's {} hold {} code rows for {} tokens", operation, side,
          codes->size(), body.tokens);
}

}  // namespace

void require_indexed_body(const BodyView& body, size_t tokens, size_t dim, const char* selector) {
  require(body.tokens == tokens && body.dim == dim, "{}: the body has {} tokens of dimension {}, the index {} of {}",
          selector, body.tokens, body.dim, tokens, dim);
}

void check_body(const BodyView& body, const char* operation) {
  check_side(body.keys, body.half_keys, body.key_codec, body.key_codes, body, "keys", operation);
  check_side(body.values, body.half_values, body.value_codec, body.value_codes, body, "values", operation);
}

void body_key_scores(const float* query, const BodyView& body, const uint32_t* tokens, size_t n, float scale,
                     float* out) {
  check_body(body, "key scores");
  if (n == 0) return;
  simd::RowSource rows;
  if (plain_rows(body.keys, body.half_keys, body.dim, tokens, rows)) return simd::row_scores(rows, n, query, 1, scale, out, n);
  const auto prepared = body.key_codec->prepare(query);
  if (tokens)
    body.key_codec->scores_at(*prepared, *body.key_codes, tokens, n, out);
  else
    body.key_codec->scores(*prepared, *body.key_codes, 0, n, out);
  for (size_t s = 0; s < n; ++s) out[s] *= scale;
}

BodyValueSum::BodyValueSum(const BodyView& body)
    : body_(body), accumulator_(body.value_codec ? body.value_codec->accumulator_size() : body.dim, 0.0f) {
  check_body(body, "value sum");
}

void BodyValueSum::add(const uint32_t* tokens, const float* weights, size_t n) {
  if (n == 0) return;
  simd::RowSource rows;
  if (plain_rows(body_.values, body_.half_values, body_.dim, tokens, rows))
    return simd::row_weighted_sum(rows, n, weights, 1, n, accumulator_.data(), body_.dim);
  if (tokens)
    body_.value_codec->accumulate_partial_at(weights, *body_.value_codes, tokens, n, accumulator_.data());
  else
    body_.value_codec->accumulate_partial(weights, *body_.value_codes, 0, n, accumulator_.data());
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
  body_.value_codec->finish_accumulator(accumulator_.data(), out);
}

}  // namespace kvsketch
