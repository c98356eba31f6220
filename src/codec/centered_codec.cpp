#include "codec/centered_codec.hpp"

#include <cstring>
#include <typeinfo>

#include "codec/accumulator_slices.hpp"
#include "codec/inner_queries.hpp"
#include "codec/spec_of.hpp"
#include "core/require.hpp"
#include "kvsketch/half.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {
namespace {

struct CenteredQuery : PreparedQuery {
  std::unique_ptr<PreparedQuery> inner;
  float shift = 0.0f;  // <q, mu>
};

}  // namespace

std::vector<float> CenteredCodec::centred(const float* x, size_t n) const {
  std::vector<float> rows(x, x + n * dim());
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < dim(); ++j) rows[i * dim() + j] -= mean_[j];
  return rows;
}

CenteredCodec::CenteredCodec(std::unique_ptr<VectorCodec> inner)
    : CodecBase(inner->dim()), inner_(codec_base(std::move(inner))), mean_(inner_->dim(), 0.0f) {}

void CenteredCodec::calibrate(const float* x, size_t n) {
  if (n == 0) return;
  require_finite(x, n, dim(), "calibrate");
  const size_t d = dim();
  std::vector<double> sum(d, 0.0);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < d; ++j) sum[j] += x[i * d + j];
  for (size_t j = 0; j < d; ++j) mean_[j] = half_to_float(float_to_half(static_cast<float>(sum[j] / n)));
  inner_->calibrate(centred(x, n).data(), n);
}

std::vector<uint8_t> CenteredCodec::calibration() const {
  std::vector<uint8_t> state(2 * dim());
  for (size_t j = 0; j < dim(); ++j) {
    const uint16_t half = float_to_half(mean_[j]);
    std::memcpy(state.data() + 2 * j, &half, 2);
  }
  const std::vector<uint8_t> inner = inner_->calibration();
  state.insert(state.end(), inner.begin(), inner.end());
  return state;
}

void CenteredCodec::set_calibration(const std::vector<uint8_t>& state) {
  require(state.size() >= 2 * dim(), "codec {}: calibration state of {} bytes is shorter than the mean ({} bytes)",
          SpecOf{*this}, state.size(), 2 * dim());
  std::vector<float> mean(dim());
  for (size_t j = 0; j < dim(); ++j) {
    uint16_t half;
    std::memcpy(&half, state.data() + 2 * j, 2);
    mean[j] = half_to_float(half);
    require(std::isfinite(mean[j]), "codec {}: calibration state has a non-finite mean in channel {}", SpecOf{*this},
            j);
  }
  inner_->set_calibration(std::vector<uint8_t>(state.begin() + static_cast<std::ptrdiff_t>(2 * dim()), state.end()));
  mean_ = mean;
}

void CenteredCodec::encode_rows(const float* x, size_t n, uint8_t* codes, size_t first_row) const {
  require_finite(x, n, dim(), "encode", first_row);
  inner_->encode_rows(centred(x, n).data(), n, codes, first_row);
}

std::unique_ptr<PreparedQuery> CenteredCodec::prepare_query(const float* q) const {
  auto prepared = std::make_unique<CenteredQuery>();
  prepared->inner = inner_->prepare_query(q);
  prepared->inner->owner = inner_.get();
  prepared->shift = simd::dot(q, mean_.data(), dim());
  return prepared;
}

bool CenteredCodec::reprepare_query(const float* q, PreparedQuery& into) const {
  if (typeid(into) != typeid(CenteredQuery)) return false;
  auto& prepared = static_cast<CenteredQuery&>(into);
  if (!inner_->reprepare_query(q, *prepared.inner)) return false;
  prepared.shift = simd::dot(q, mean_.data(), dim());
  return true;
}

void CenteredCodec::score_rows(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const {
  const auto& query = static_cast<const CenteredQuery&>(q);
  inner_->score_rows(*query.inner, codes, n, out);
  for (size_t i = 0; i < n; ++i) out[i] += query.shift;
}

void CenteredCodec::accumulate_rows(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const {
  inner_->accumulate_rows(weights, codes, n, accumulator);
  accumulator[inner_->accumulator_size()] += simd::fixed_order_sum(weights, n);
}

void CenteredCodec::decode_rows(const uint8_t* codes, size_t n, float* out) const {
  if (inner_->row_group() == 1) return CodecBase::decode_rows(codes, n, out);
  inner_->decode_rows(codes, n, out);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < dim(); ++j) out[i * dim() + j] += mean_[j];
}

void CenteredCodec::score_rows_multi(const PreparedQuery* const* queries, size_t heads, const uint8_t* codes, size_t n,
                                     float* out, size_t stride, Arithmetic arithmetic) const {
  inner_->score_rows_multi(inner_queries<CenteredQuery>(queries, heads).data(), heads, codes, n, out, stride,
                           arithmetic);
  for (size_t h = 0; h < heads; ++h) {
    const float shift = static_cast<const CenteredQuery&>(*queries[h]).shift;
    for (size_t i = 0; i < n; ++i) out[h * stride + i] += shift;
  }
}

void CenteredCodec::accumulate_rows_multi(const float* weights, size_t heads, size_t stride, const uint8_t* codes,
                                          size_t n, float* accumulators, Arithmetic arithmetic) const {
  const size_t width = inner_->accumulator_size();
  with_accumulator_slices(accumulators, heads, width + 1, 0, width, [&](float* slices) {
    inner_->accumulate_rows_multi(weights, heads, stride, codes, n, slices, arithmetic);
  });
  // The weights' sum by SIMD partial sums: one running float sum is a chain of dependent adds.
  for (size_t h = 0; h < heads; ++h)
    accumulators[h * (width + 1) + width] += simd::fixed_order_sum(weights + h * stride, n);
}

void CenteredCodec::describe_row(RowLayout& layout) const {
  layout = inner_->row_layout();
  layout.has_keys = layout.has_keys && !layout.key_shift;  // one shift: centring twice is refused
  layout.key_shift = true;
  layout.accumulator = accumulator_size();
  layout.weight_sums.push_back(inner_->accumulator_size());
}

void CenteredCodec::key_domain(const PreparedQuery& q, float* out) const {
  inner_->key_domain(*static_cast<const CenteredQuery&>(q).inner, out);
}

float CenteredCodec::key_shift(const PreparedQuery& q) const { return static_cast<const CenteredQuery&>(q).shift; }

void CenteredCodec::finish_accumulator(const float* accumulator, float* out) const {
  inner_->finish_accumulator(accumulator, out);
  const float total = accumulator[inner_->accumulator_size()];
  for (size_t j = 0; j < dim(); ++j) out[j] += total * mean_[j];
}

}  // namespace kvsketch
