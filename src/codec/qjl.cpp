#include "codec/qjl.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <memory>
#include <mutex>
#include <numeric>

#include "codec/channel_list.hpp"
#include "core/require.hpp"
#include "kvsketch/random.hpp"
#include "codec/norm_storage.hpp"
#include "simd/int_index_kernels.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {
namespace {

struct QjlQuery : PreparedQuery {
  std::vector<float> projected[2];  // S q of the inlier and the outlier channels
  // The byte tables of the one-query scan (score_rows), built at its first use: the multi-query
  // kernels of decode attention read only the projections.
  mutable std::once_flag tables_built;
  mutable std::vector<float> tables[2];
};

float qjl_scale(const Sketch& sketch) {
  return static_cast<float>(std::sqrt(M_PI / 2.0) / (static_cast<double>(sketch.rows()) * sketch.bias_factor()));
}

}  // namespace

Qjl::Qjl(size_t dim, const QjlOptions& options) : CodecBase(dim), options_(options) {
  if (options_.rows == 0) options_.rows = dim;
  require(options_.outliers < dim, "qjl: outliers={} must be smaller than the dimension {}", options_.outliers, dim);
  if (options_.outliers > 0 && options_.outlier_rows == 0) options_.outlier_rows = 32 * options_.outliers;
  // Until calibrate() picks them, the outlier channels are the last ones (a valid, data-blind split).
  std::vector<size_t> channels(options_.outliers);
  std::iota(channels.begin(), channels.end(), dim - options_.outliers);
  set_outlier_channels(channels);
}

void Qjl::set_outlier_channels(const std::vector<size_t>& channels) {
  require(channels.size() == options_.outliers, "qjl: expected {} outlier channels, got {}", options_.outliers,
          channels.size());
  const std::vector<bool> is_outlier = channel_membership(channels, dim(), "qjl (outlier channels)");
  outlier_channels_ = channels;
  std::sort(outlier_channels_.begin(), outlier_channels_.end());
  inlier_channels_.clear();
  for (size_t c = 0; c < dim(); ++c)
    if (!is_outlier[c]) inlier_channels_.push_back(c);
  inlier_sketch_ = std::make_unique<Sketch>(options_.sketch, options_.rows, inlier_channels_.size(),
                                            derive_seed(options_.seed, {static_cast<uint64_t>(StreamPurpose::kSketch)}),
                                            options_.rounds);
  inlier_signs_ = std::make_unique<SignCodeStage>(*inlier_sketch_);
  inlier_scale_ = qjl_scale(*inlier_sketch_);
  outlier_offset_ = inlier_signs_->bytes();
  norm_offset_ = outlier_offset_;
  if (options_.outliers > 0) {
    outlier_sketch_ = std::make_unique<Sketch>(
        options_.sketch, options_.outlier_rows, options_.outliers,
        derive_seed(options_.seed, {static_cast<uint64_t>(StreamPurpose::kOutlierSketch)}), options_.rounds);
    outlier_signs_ = std::make_unique<SignCodeStage>(*outlier_sketch_);
    outlier_scale_ = qjl_scale(*outlier_sketch_);
    norm_offset_ += outlier_signs_->bytes();
  }
  code_bytes_ = norm_offset_ + norm_bytes(options_.norm) * (options_.outliers > 0 ? 2 : 1);
}

void Qjl::calibrate(const float* x, size_t n) {
  if (options_.outliers == 0 || n == 0) return;
  require_finite(x, n, dim(), "calibrate");
  const std::vector<size_t> order = channels_by_energy(x, n, dim());
  set_outlier_channels(std::vector<size_t>(order.begin(), order.begin() + options_.outliers));
}

std::vector<uint8_t> Qjl::calibration() const { return channel_list_bytes(outlier_channels_); }

void Qjl::set_calibration(const std::vector<uint8_t>& state) {
  set_outlier_channels(channel_list_from_bytes(state, options_.outliers, spec()));
}

std::string Qjl::spec() const {
  std::string text = fmt::format("qjl:m={},sketch={}", options_.rows, sketch_kind_name(options_.sketch));
  if (options_.outliers) text += fmt::format(",outliers={},m_out={}", options_.outliers, options_.outlier_rows);
  if (options_.sketch == SketchKind::kHadamard) text += fmt::format(",rounds={}", options_.rounds);
  return text + fmt::format(",norm={},seed={}", norm_precision_name(options_.norm), options_.seed);
}

void Qjl::split(const float* x, float* inliers, float* outliers) const {
  for (size_t k = 0; k < inlier_channels_.size(); ++k) inliers[k] = x[inlier_channels_[k]];
  for (size_t k = 0; k < outlier_channels_.size(); ++k) outliers[k] = x[outlier_channels_[k]];
}

void Qjl::encode_rows(const float* x, size_t n, uint8_t* codes, size_t first_row) const {
  std::vector<float> inliers(inlier_channels_.size()), outliers(outlier_channels_.size());
  std::vector<float> projection(std::max(options_.rows, options_.outlier_rows));
  for (size_t i = 0; i < n; ++i) {
    uint8_t* code = codes + i * code_bytes_;
    std::memset(code, 0, code_bytes_);
    finite_norm(x + i * dim(), first_row + i);
    split(x + i * dim(), inliers.data(), outliers.data());
    inlier_signs_->encode(inliers.data(), code, projection.data());
    store_norm(options_.norm, std::sqrt(simd::sum_of_squares(inliers.data(), inliers.size())), code + norm_offset_);
    if (!outlier_signs_) continue;
    outlier_signs_->encode(outliers.data(), code + outlier_offset_, projection.data());
    store_norm(options_.norm, std::sqrt(simd::sum_of_squares(outliers.data(), outliers.size())),
               code + norm_offset_ + norm_bytes(options_.norm));
  }
}

size_t Qjl::accumulator_size() const { return options_.rows + (outlier_signs_ ? options_.outlier_rows : 0); }

// One query's weighted sum: the multi-query form with one head (the sign rows in registers).
void Qjl::accumulate_rows(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const {
  accumulate_rows_one_head(weights, codes, n, accumulator);
}

void Qjl::finish_accumulator(const float* accumulator, float* out) const {
  std::vector<float> inliers(inlier_channels_.size(), 0.0f), outliers(outlier_channels_.size(), 0.0f);
  inlier_signs_->finish(accumulator, inliers.data());
  for (size_t k = 0; k < inlier_channels_.size(); ++k) out[inlier_channels_[k]] += inliers[k];
  if (!outlier_signs_) return;
  outlier_signs_->finish(accumulator + options_.rows, outliers.data());
  for (size_t k = 0; k < outlier_channels_.size(); ++k) out[outlier_channels_[k]] += outliers[k];
}

std::unique_ptr<PreparedQuery> Qjl::prepare_query(const float* q) const {
  auto prepared = std::make_unique<QjlQuery>();
  std::vector<float> inliers(inlier_channels_.size()), outliers(outlier_channels_.size());
  split(q, inliers.data(), outliers.data());
  const float* parts[2] = {inliers.data(), outliers.data()};
  for (size_t which = 0; which < parts_(); ++which) {
    prepared->projected[which].resize(stage(which).rows());
    stage(which).sketch().project(parts[which], prepared->projected[which].data());
  }
  return prepared;
}

void Qjl::score_rows(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const {
  const auto& query = static_cast<const QjlQuery&>(q);
  std::call_once(query.tables_built, [&] {
    for (size_t which = 0; which < parts_(); ++which)
      stage(which).tables_from_projection(query.projected[which].data(), query.tables[which]);
  });
  constexpr size_t kChunk = 256;
  float outlier_sums[kChunk];
  for (size_t start = 0; start < n; start += kChunk) {
    const size_t count = std::min(kChunk, n - start);
    const uint8_t* chunk = codes + start * code_bytes_;
    inlier_signs_->scores(query.tables[0].data(), chunk, code_bytes_, count, out + start);
    for (size_t i = 0; i < count; ++i) out[start + i] *= inlier_scale_ * load(chunk + i * code_bytes_, 0);
    if (!outlier_signs_) continue;
    outlier_signs_->scores(query.tables[1].data(), chunk + outlier_offset_, code_bytes_, count, outlier_sums);
    for (size_t i = 0; i < count; ++i)
      out[start + i] += outlier_scale_ * load(chunk + i * code_bytes_, 1) * outlier_sums[i];
  }
}

// The GQA group's heads in one pass over each part's signs (SignCodeStage::multi_scores).
void Qjl::score_rows_multi(const PreparedQuery* const* queries, size_t heads, const uint8_t* codes, size_t n,
                           float* out, size_t stride, Arithmetic arithmetic) const {
  const auto part_scores = std::make_unique_for_overwrite<float[]>(outlier_signs_ ? heads * n : 0);
  for (size_t which = 0; which < parts_(); ++which) {
    const SignCodeStage& signs = stage(which);
    const size_t m = signs.rows();
    std::vector<float> projected(heads * m);
    for (size_t h = 0; h < heads; ++h)
      std::copy_n(static_cast<const QjlQuery&>(*queries[h]).projected[which].data(), m, projected.data() + h * m);
    const float scale = which ? outlier_scale_ : inlier_scale_;
    float* target = which ? part_scores.get() : out;
    signs.multi_scores(part_rows(codes, which), n, projected.data(), heads, scale, target, which ? n : stride,
                       arithmetic);
  }
  for (size_t h = 0; h < heads && outlier_signs_; ++h)
    for (size_t i = 0; i < n; ++i) out[h * stride + i] += part_scores[h * n + i];
}

void Qjl::accumulate_rows_multi(const float* weights, size_t heads, size_t stride, const uint8_t* codes, size_t n,
                                float* accumulators, Arithmetic arithmetic) const {
  const size_t width = accumulator_size();
  const auto norms = std::make_unique_for_overwrite<float[]>(n);
  const auto scaled = std::make_unique_for_overwrite<float[]>(heads * n);
  for (size_t which = 0; which < parts_(); ++which) {
    const SignCodeStage::Rows rows = part_rows(codes, which);
    const float scale = which ? outlier_scale_ : inlier_scale_;
    load_norms(rows.norm, rows.codes + rows.norm_offset, rows.stride, n, norms.get());
    for (size_t h = 0; h < heads; ++h)
      for (size_t i = 0; i < n; ++i) scaled[h * n + i] = weights[h * stride + i] * scale * norms[i];
    stage(which).multi_weighted_sum(rows, n, scaled.get(), heads, n, accumulators + (which ? options_.rows : 0),
                                    width, arithmetic);
  }
}

// Part `which`'s signs (0: inliers, 1: outliers) in rows of codes, and its norm.
SignCodeStage::Rows Qjl::part_rows(const uint8_t* codes, size_t which) const {
  const size_t offset = which ? outlier_offset_ : 0;
  const size_t norm_at = norm_offset_ + which * norm_bytes(options_.norm);
  return {codes + offset, code_bytes_, code_bytes_ - offset, norm_at - offset, options_.norm};
}

}  // namespace kvsketch
