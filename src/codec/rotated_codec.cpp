#include "codec/rotated_codec.hpp"

#include <typeinfo>

#include "codec/inner_queries.hpp"
#include "core/kernel_memory.hpp"
#include "kvsketch/random.hpp"

namespace kvsketch {
namespace {

struct RotatedQuery : PreparedQuery {
  std::unique_ptr<PreparedQuery> inner;
  std::vector<float> rotated;  // the query rotated, kept for reprepare_query
};

}  // namespace

RotatedCodec::RotatedCodec(std::unique_ptr<VectorCodec> inner, uint64_t seed)
    : CodecBase(inner->dim()),
      inner_(codec_base(std::move(inner))),
      // A seed of its own: the inner codec's rotation (TurboQuant's) must not be this one.
      rotation_(make_rotation(RotationKind::kHadamard, dim(), derive_seed(seed, {0x726f74617465ull}), 2)) {}

std::vector<float> RotatedCodec::rotated(const float* x, size_t n) const {
  std::vector<float> rows(n * dim());
  for (size_t i = 0; i < n; ++i) rotation_->apply(x + i * dim(), rows.data() + i * dim());
  return rows;
}

void RotatedCodec::calibrate(const float* x, size_t n) {
  if (n == 0 || !inner_->calibrated_by_data()) return;
  require_finite(x, n, dim(), "calibrate");
  inner_->calibrate(rotated(x, n).data(), n);
}

void RotatedCodec::encode_rows(const float* x, size_t n, uint8_t* codes, size_t first_row) const {
  require_finite(x, n, dim(), "encode", first_row);
  inner_->encode_rows(rotated(x, n).data(), n, codes, first_row);
}

std::unique_ptr<PreparedQuery> RotatedCodec::prepare_query(const float* q) const {
  auto prepared = std::make_unique<RotatedQuery>();
  prepared->rotated = rotated(q, 1);
  prepared->inner = inner_->prepare_query(prepared->rotated.data());
  prepared->inner->owner = inner_.get();
  return prepared;
}

bool RotatedCodec::reprepare_query(const float* q, PreparedQuery& into) const {
  if (typeid(into) != typeid(RotatedQuery)) return false;
  auto& prepared = static_cast<RotatedQuery&>(into);
  rotation_->apply(q, prepared.rotated.data());
  return inner_->reprepare_query(prepared.rotated.data(), *prepared.inner);
}

void RotatedCodec::score_rows(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const {
  inner_->score_rows(*static_cast<const RotatedQuery&>(q).inner, codes, n, out);
}

void RotatedCodec::accumulate_rows(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const {
  inner_->accumulate_rows(weights, codes, n, accumulator);
}

void RotatedCodec::decode_rows(const uint8_t* codes, size_t n, float* out) const {
  inner_->decode_rows(codes, n, out);
  for (size_t i = 0; i < n; ++i) rotation_->apply_transpose(out + i * dim(), out + i * dim());
}

void RotatedCodec::score_rows_multi(const PreparedQuery* const* queries, size_t heads, const uint8_t* codes, size_t n,
                                    float* out, size_t stride, Arithmetic arithmetic) const {
  inner_->score_rows_multi(inner_queries<RotatedQuery>(queries, heads).data(), heads, codes, n, out, stride,
                           arithmetic);
}

void RotatedCodec::accumulate_rows_multi(const float* weights, size_t heads, size_t stride, const uint8_t* codes,
                                         size_t n, float* accumulators, Arithmetic arithmetic) const {
  inner_->accumulate_rows_multi(weights, heads, stride, codes, n, accumulators, arithmetic);
}

void RotatedCodec::key_domain(const PreparedQuery& q, float* out) const {
  inner_->key_domain(*static_cast<const RotatedQuery&>(q).inner, out);
}

void RotatedCodec::finish_accumulator(const float* accumulator, float* out) const {
  KernelVector<float> sum(dim(), 0.0f);  // once per head and step: kernel memory
  inner_->finish_accumulator(accumulator, sum.data());
  rotation_->apply_transpose(sum.data(), sum.data());
  for (size_t j = 0; j < dim(); ++j) out[j] += sum[j];
}

}  // namespace kvsketch
