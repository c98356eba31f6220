#include "codec/turboquant.hpp"

#include <algorithm>
#include <typeinfo>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <fmt/format.h>

#include "core/kernel_memory.hpp"
#include "core/require.hpp"
#include "kvsketch/random.hpp"
#include "simd/int_index_kernels.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {
namespace {

struct TurboQuantQuery : PreparedQuery {
  std::vector<float> domain;  // [rotated q | prod: S rotated q]
  // The byte tables of the one-query scan (score_rows), built at its first use: the multi-query
  // kernels of decode attention read only `domain`, and building 256-entry tables for every code
  // byte cost a quarter of a decode step at b = 2.
  mutable std::once_flag tables_built;
  mutable std::vector<float> scalar_tables, sign_tables;
};

// Where the integer kernels find each row's norm.
simd::RowFactor stored_norms(size_t offset, NormPrecision precision) {
  return {offset, precision == NormPrecision::kFp16};
}

}  // namespace

TurboQuant::TurboQuant(size_t dim, const TurboQuantOptions& options)
    : CodecBase(dim),
      options_(options),
      rotation_(make_rotation(options.rotation, dim, options.seed, options.rounds)),
      scalar_(dim, options.residual_signs ? options.bits - 1 : options.bits, options.law) {
  if (options.residual_signs) {
    sketch_ = std::make_unique<Sketch>(options.sketch, dim, dim, derive_seed(options.seed, {1}), options.rounds);
    signs_ = std::make_unique<SignCodeStage>(*sketch_);
    sign_scale_ = static_cast<float>(std::sqrt(M_PI / 2.0) / (static_cast<double>(dim) * sketch_->bias_factor()));
  }
  sign_offset_ = scalar_.bytes();
  norm_offset_ = sign_offset_ + (signs_ ? signs_->bytes() : 0);
  code_bytes_ = norm_offset_ + norm_bytes(options.norm) * (signs_ ? 2 : 1);
  row_stride_ = code_bytes_;
}

void TurboQuant::set_row_stride(size_t stride) {
  require(stride >= code_bytes_, "TurboQuant: row stride {} is smaller than the code ({} bytes)", stride, code_bytes_);
  row_stride_ = stride;
}

std::string TurboQuant::spec() const {
  std::string text = fmt::format("{}:b={},rotation={},rounds={},codebook={},norm={}",
                                 options_.residual_signs ? "tq_prod" : "tq_mse", options_.bits,
                                 options_.rotation == RotationKind::kHaar ? "haar" : "hadamard", options_.rounds,
                                 coordinate_law_name(options_.law), norm_precision_name(options_.norm));
  if (options_.residual_signs) text += ",sketch=" + sketch_kind_name(options_.sketch);
  if (options_.rescale) text += ",rescale=1";
  return text + fmt::format(",seed={}", options_.seed);
}

void TurboQuant::encode_rows_given(const float* x, const float* squared_norms, size_t n, uint8_t* codes,
                                   size_t first_row) const {
  const size_t d = dim();
  std::vector<float> unit(d), residual(d), projection(signs_ ? signs_->rows() : 0);
  std::vector<uint8_t> scratch(d);
  for (size_t i = 0; i < n; ++i) {
    const float* row = x + i * d;
    uint8_t* code = codes + i * row_stride_;
    std::memset(code, 0, code_bytes_);
    const float norm = finite_norm(row, first_row + i, squared_norms ? squared_norms + i : nullptr);
    if (norm == 0.0f) continue;  // zero vector: norm 0 decodes to exactly zero
    rotation_->apply_scaled(row, 1.0f / norm, unit.data());  // the unit vector, rotated
    float stored = norm;
    if (options_.rescale && !signs_) {  // the rescale alone needs no residual
      stored = norm / scalar_.encode_codeword_product(unit.data(), code, scratch.data());
    } else {
      scalar_.encode(unit.data(), code, signs_ || options_.rescale ? residual.data() : nullptr, scratch.data());
      if (options_.rescale) stored = norm / scalar_.codeword_inner_product(unit.data(), residual.data());
    }
    store_norm(options_.norm, stored, code + norm_offset_);
    if (!signs_) continue;
    // The residual lives in the rotated domain, where the sketch acts.
    const float gamma = std::sqrt(simd::sum_of_squares(residual.data(), d));
    signs_->encode(residual.data(), code + sign_offset_, projection.data());
    store_norm(options_.norm, gamma, code + gamma_offset());
  }
}

std::unique_ptr<PreparedQuery> TurboQuant::prepare_query(const float* q) const {
  auto prepared = std::make_unique<TurboQuantQuery>();
  std::vector<float> rotated(dim());
  rotation_->apply(q, rotated.data());
  prepared->domain = rotated;
  if (signs_) {
    prepared->domain.resize(accumulator_size());
    sketch_->project(rotated.data(), prepared->domain.data() + dim());
  }
  return prepared;
}

// In place where the query's one-query tables were never built (decode steps use `domain` only).
bool TurboQuant::reprepare_query(const float* q, PreparedQuery& into) const {
  if (typeid(into) != typeid(TurboQuantQuery)) return false;
  auto& prepared = static_cast<TurboQuantQuery&>(into);
  if (prepared.domain.size() != accumulator_size() || !prepared.scalar_tables.empty() ||
      !prepared.sign_tables.empty())
    return false;
  rotation_->apply(q, prepared.domain.data());
  if (signs_) sketch_->project(prepared.domain.data(), prepared.domain.data() + dim());
  return true;
}

void TurboQuant::score_rows(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const {
  const auto& query = static_cast<const TurboQuantQuery&>(q);
  std::call_once(query.tables_built, [&] {
    scalar_.build_tables(query.domain.data(), query.scalar_tables);
    if (signs_) signs_->build_tables(query.domain.data(), query.sign_tables);
  });
  constexpr size_t kChunk = 256;
  float sign_sums[kChunk];
  for (size_t start = 0; start < n; start += kChunk) {
    const size_t count = std::min(kChunk, n - start);
    const uint8_t* chunk = codes + start * row_stride_;
    scalar_.scores(query.scalar_tables.data(), chunk, row_stride_, count, out + start);
    if (signs_) {
      signs_->scores(query.sign_tables.data(), chunk + sign_offset_, row_stride_, count, sign_sums);
      for (size_t i = 0; i < count; ++i)
        out[start + i] += sign_scale_ * gamma_of(chunk + i * row_stride_) * sign_sums[i];
    }
    for (size_t i = 0; i < count; ++i) out[start + i] *= norm_of(chunk + i * row_stride_);
  }
}

// One query's weighted sum is the multi-query one with one head: the row kernels decode in registers,
// several times faster than decoding each row into floats first.
void TurboQuant::accumulate_rows(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const {
  accumulate_rows_one_head(weights, codes, n, accumulator);
}

simd::RowSource TurboQuant::index_rows(const uint8_t* codes) const {
  const auto& centroids = scalar_.codebook().centroids;
  return {simd::RowFormat::kIndex, codes, row_stride_, dim(), scalar_.bits(), centroids.data(), code_bytes_};
}

SignCodeStage::Rows TurboQuant::sign_part(const uint8_t* codes) const {
  return {codes + sign_offset_, row_stride_, code_bytes_ - sign_offset_, gamma_offset() - sign_offset_, options_.norm};
}

void TurboQuant::score_rows_multi(const PreparedQuery* const* queries, size_t heads, const uint8_t* codes, size_t n,
                                  float* out, size_t stride, Arithmetic arithmetic) const {
  const size_t d = dim(), m = signs_ ? signs_->rows() : 0;
  KernelVector<float> rotated(heads * d), projected(heads * m);
  for (size_t h = 0; h < heads; ++h) {
    const auto& domain = static_cast<const TurboQuantQuery&>(*queries[h]).domain;
    std::copy_n(domain.data(), d, rotated.data() + h * d);
    std::copy_n(domain.data() + d, m, projected.data() + h * m);
  }
  const auto rows = index_rows(codes);
  const bool integer = arithmetic == Arithmetic::kInteger && simd::int_index_usable(rows);
  if (integer && !signs_) {  // the norms are read in the kernel's pass over the rows
    const simd::RowFactor norms = stored_norms(norm_offset_, options_.norm);
    simd::int_index_scores(rows, n, rotated.data(), heads, 1.0f, out, stride, &norms);
    return;
  }
  if (integer) {
    simd::int_index_scores(rows, n, rotated.data(), heads, 1.0f, out, stride);
  } else if (scalar_.bits() > 0) {
    simd::row_scores(rows, n, rotated.data(), heads, 1.0f, out, stride);
  } else {
    for (size_t h = 0; h < heads; ++h) std::fill(out + h * stride, out + h * stride + n, 0.0f);
  }
  // Scratch written in full before it is read: not zeroed (a pass over heads x n floats per call).
  const auto norms = kernel_array<float>(n);
  const auto sign_sums = kernel_array<float>(signs_ ? heads * n : 0);
  load_norms(options_.norm, codes + norm_offset_, row_stride_, n, norms.get());
  if (signs_)
    signs_->multi_scores(sign_part(codes), n, projected.data(), heads, sign_scale_, sign_sums.get(), n, arithmetic);
  for (size_t h = 0; h < heads; ++h) {
    float* row = out + h * stride;
    if (signs_)
      for (size_t i = 0; i < n; ++i) row[i] = (row[i] + sign_sums[h * n + i]) * norms[i];
    else
      for (size_t i = 0; i < n; ++i) row[i] *= norms[i];
  }
}

void TurboQuant::describe_row(RowLayout& layout) const {
  const size_t d = dim(), m = signs_ ? signs_->rows() : 0, bits = static_cast<size_t>(scalar_.bits());
  const RowLayout::Factor norm{norm_offset_, options_.norm == NormPrecision::kFp16};
  layout.row_bytes = row_stride_;
  if (bits > 0) layout.fields.push_back({0, scalar_.bytes(), std::min(bits, scalar_.bytes())});
  if (signs_) layout.fields.push_back({sign_offset_, signs_->bytes(), 1});
  for (size_t at = norm_offset_; at < code_bytes_; at += norm_bytes(options_.norm))
    layout.fields.push_back({at, norm_bytes(options_.norm), norm_bytes(options_.norm)});
  const auto& centroids = scalar_.codebook().centroids;
  const RowLayout::Indices scalar{0, d, static_cast<int>(bits), {centroids.begin(), centroids.end()}};
  layout.has_keys = true;
  layout.key_domain = d + m;
  if (!signs_) {
    layout.key_parts.push_back({scalar, norm, 0, 1.0f});
    layout.key_groups.push_back({0, 1, std::nullopt});
    layout.has_values = true;
    layout.accumulator = accumulator_size();
    layout.value_parts.push_back({scalar, norm, 0, 1.0f});
    return;
  }
  // prod: (scalar score + sign score) * norm, as score_rows_multi forms it; the signs are 1-bit
  // indices into {-1, +1}, times their residual norm gamma.
  if (bits > 0) layout.key_parts.push_back({scalar, std::nullopt, 0, 1.0f});
  const simd::RowSource signs = signs_->index_rows(nullptr, row_stride_, code_bytes_ - sign_offset_);
  layout.key_parts.push_back({{sign_offset_, m, 1, {signs.table, signs.table + 2}},
                              RowLayout::Factor{gamma_offset(), options_.norm == NormPrecision::kFp16},
                              d,
                              sign_scale_});
  layout.key_groups.push_back({0, layout.key_parts.size(), norm});
}

void TurboQuant::key_domain(const PreparedQuery& q, float* out) const {
  const std::vector<float>& domain = static_cast<const TurboQuantQuery&>(q).domain;
  std::copy(domain.begin(), domain.end(), out);
}

void TurboQuant::accumulate_rows_multi(const float* weights, size_t heads, size_t stride, const uint8_t* codes,
                                       size_t n, float* accumulators, Arithmetic arithmetic) const {
  const size_t width = accumulator_size();
  const auto rows = index_rows(codes);
  const bool integer = arithmetic == Arithmetic::kInteger && simd::int_index_usable(rows);
  if (integer && !signs_) {  // the norms are read in the kernel's pass over the rows
    const simd::RowFactor norms = stored_norms(norm_offset_, options_.norm);
    simd::int_index_weighted_sum(rows, n, weights, heads, stride, accumulators, width, &norms);
    return;
  }
  const auto norms = kernel_array<float>(n);
  const auto gammas = kernel_array<float>(signs_ ? n : 0);
  const auto scaled = kernel_array<float>(heads * n);
  const auto sign_scaled = kernel_array<float>(signs_ ? heads * n : 0);
  load_norms(options_.norm, codes + norm_offset_, row_stride_, n, norms.get());
  if (signs_) load_norms(options_.norm, codes + gamma_offset(), row_stride_, n, gammas.get());
  for (size_t h = 0; h < heads; ++h) {
    const float* w = weights + h * stride;
    for (size_t i = 0; i < n; ++i) scaled[h * n + i] = w[i] * norms[i];
    if (signs_)
      for (size_t i = 0; i < n; ++i) sign_scaled[h * n + i] = scaled[h * n + i] * (sign_scale_ * gammas[i]);
  }
  if (integer)
    simd::int_index_weighted_sum(rows, n, scaled.get(), heads, n, accumulators, width);
  else if (scalar_.bits() > 0)
    simd::row_weighted_sum(rows, n, scaled.get(), heads, n, accumulators, width);
  if (signs_)
    signs_->multi_weighted_sum(sign_part(codes), n, sign_scaled.get(), heads, n, accumulators + dim(), width,
                               arithmetic);
}

void TurboQuant::finish_accumulator(const float* accumulator, float* out) const {
  const size_t d = dim();
  KernelVector<float> rotated(accumulator, accumulator + d);  // kernel memory: no allocation once warm
  if (signs_) signs_->finish(accumulator + d, rotated.data());
  rotation_->apply_transpose(rotated.data(), rotated.data());
  for (size_t j = 0; j < d; ++j) out[j] += rotated[j];
}

std::optional<TurboQuant::ScanLayout> TurboQuant::scan_layout() const {
  if (signs_ || scalar_.bits() == 0) return std::nullopt;
  return ScanLayout{scalar_.bits(), scalar_.codebook().centroids.data(), scalar_.bytes(), norm_offset_, options_.norm};
}

}  // namespace kvsketch
