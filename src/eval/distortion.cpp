#include "kvsketch/eval/distortion.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "kvsketch/codec.hpp"
#include "core/require.hpp"
#include "kvsketch/eval/datasets.hpp"
#include "kvsketch/random.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {
namespace {

void normalize_rows(std::vector<float>& values, size_t dim) {
  for (size_t start = 0; start < values.size(); start += dim) {
    double sum = 0;
    for (size_t j = 0; j < dim; ++j) sum += static_cast<double>(values[start + j]) * values[start + j];
    require(std::isfinite(sum), "distortion: input row {} holds NaN or Inf (or values whose squares overflow)",
            start / dim);
    require(sum > 0, "distortion: input row {} is a zero vector and cannot be normalized", start / dim);
    const double inverse = 1.0 / std::sqrt(sum);
    for (size_t j = 0; j < dim; ++j) values[start + j] = static_cast<float>(values[start + j] * inverse);
  }
}

std::vector<float> gaussian_rows(size_t rows, size_t dim, uint64_t seed, StreamPurpose purpose) {
  RandomStream stream(seed, purpose, {dim});
  std::vector<float> values(rows * dim);
  for (auto& v : values) v = static_cast<float>(stream.gaussian());
  return values;
}

// Base vectors and query directions, unit-normalized.
void make_inputs(const DistortionConfig& config, size_t& dim, std::vector<float>& base, std::vector<float>& queries) {
  const size_t n = config.vectors, q = config.queries;
  if (config.input != "random" && config.input != "e1" && config.input != "sparse") {
    Matrix file = read_matrix(config.input);
    require(config.dim == 0 || config.dim == file.cols, "distortion: --dim {} does not match {} columns in '{}'",
            config.dim, file.cols, config.input);
    dim = file.cols;
    require(file.rows >= n, "distortion: '{}' has {} rows, fewer than --vectors {}", config.input, file.rows, n);
    base.assign(file.values.begin(), file.values.begin() + n * dim);
    // Queries: the rows after the base vectors when there are enough, else random directions.
    if (file.rows >= n + q)
      queries.assign(file.values.begin() + n * dim, file.values.begin() + (n + q) * dim);
    else
      queries = gaussian_rows(q, dim, config.seed, StreamPurpose::kQueries);
  } else {
    require(config.dim >= 2, "distortion: --dim must be >= 2 for input '{}', got {}", config.input, config.dim);
    dim = config.dim;
    queries = gaussian_rows(q, dim, config.seed, StreamPurpose::kQueries);
    if (config.input == "random") {
      base = gaussian_rows(n, dim, config.seed, StreamPurpose::kData);
    } else {
      base.assign(n * dim, 0.0f);
      RandomStream stream(config.seed, StreamPurpose::kData, {dim, 7});
      for (size_t i = 0; i < n; ++i) {
        if (config.input == "e1") {
          base[i * dim + i % dim] = 1.0f;  // the standard basis, cycling through coordinates
        } else {                           // (e_a +- e_b) / sqrt 2: two-sparse worst cases
          const size_t a = stream.below(dim);
          size_t b = stream.below(dim - 1);
          if (b >= a) ++b;
          base[i * dim + a] = stream.sign();
          base[i * dim + b] = stream.sign();
        }
      }
    }
  }
  normalize_rows(base, dim);
  normalize_rows(queries, dim);
}

std::string spec_for(const std::string& codec, int bits, size_t dim, const std::string& options) {
  std::string spec;
  if (codec == "tq_mse" || codec == "tq_prod")
    spec = fmt::format("{}:b={}", codec, bits);
  else if (codec == "qjl")
    spec = fmt::format("qjl:m={}", static_cast<size_t>(bits) * dim);
  else
    throw Error(fmt::format("distortion: codec '{}' is not one of tq_mse, tq_prod, qjl", codec));
  if (!options.empty()) spec += "," + options;
  return spec;
}

// The (vector, query) pairs the inner-product statistics use. A pair's query at rho is built from
// the part of the query direction z orthogonal to the vector x, which a z (anti)parallel to x (a
// duplicate row in real data) does not have: such pairs are left out and the means are over the rest.
struct MeasuredPairs {
  std::vector<char> used;                      // [i * q + j]
  std::vector<size_t> per_vector, per_query;   // pairs used per vector and per query
  size_t pairs = 0, vectors = 0, queries = 0;  // pairs used; vectors and queries with any

  MeasuredPairs(const std::vector<double>& truth_z, size_t n, size_t q)
      : used(n * q), per_vector(n, 0), per_query(q, 0) {
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < q; ++j) {
        const double t = truth_z[i * q + j];
        used[i * q + j] = 1.0 - t * t > 1e-9;
        per_vector[i] += used[i * q + j];
        per_query[j] += used[i * q + j];
      }
    for (const size_t count : per_vector) pairs += count, vectors += count > 0;
    for (const size_t count : per_query) queries += count > 0;
    require(vectors >= 2, "distortion: {} of the vectors have a query not parallel to them (duplicate rows?); "
            "the inner-product statistics need 2", vectors);
  }
};

// One codec instance: MSE and inner-product statistics over the vectors and the used pairs.
DistortionRow measure(const std::string& spec, uint64_t seed, size_t dim, const std::vector<float>& base,
                      const std::vector<float>& queries, const std::vector<double>& rho,
                      const std::vector<double>& truth_z, const MeasuredPairs& measured, size_t n, size_t q) {
  auto codec = make_codec(spec, dim, seed);
  codec->calibrate(base.data(), n);
  CodeBuffer codes = codec->make_buffer();
  codec->encode(base.data(), n, codes);
  std::vector<float> decoded(n * dim);
  codec->decode(codes, 0, n, decoded.data());
  std::vector<double> self(n);
  double squared_error = 0;
  for (size_t i = 0; i < n; ++i) {
    double e = 0;
    for (size_t j = 0; j < dim; ++j) {
      const double diff = static_cast<double>(base[i * dim + j]) - decoded[i * dim + j];
      e += diff * diff;
    }
    squared_error += e;
    self[i] = simd::reference::dot(&base[i * dim], &decoded[i * dim], dim);
  }
  std::vector<float> cross(q * n);
#pragma omp parallel for schedule(static)
  for (long j = 0; j < static_cast<long>(q); ++j) {
    auto prepared = codec->prepare(&queries[j * dim]);
    codec->scores(*prepared, codes, 0, n, &cross[j * n]);
  }
  double sum_error = 0, sum_cross = 0, sum_truth_sq = 0;
  std::vector<double> per_vector(n, 0.0), per_query(q, 0.0), per_query_sq(q, 0.0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < q; ++j) {
      if (!measured.used[i * q + j]) continue;
      const double t = truth_z[i * q + j];
      const double s = std::sqrt(1.0 - rho[j] * rho[j]);
      const double estimate = rho[j] * self[i] + s / std::sqrt(1.0 - t * t) * (cross[j * n + i] - t * self[i]);
      const double error = estimate - rho[j];
      sum_error += error;
      sum_cross += estimate * rho[j];
      sum_truth_sq += rho[j] * rho[j];
      per_vector[i] += error / static_cast<double>(measured.per_vector[i]);
      per_query[j] += error / static_cast<double>(measured.per_query[j]);
      per_query_sq[j] += error * error / static_cast<double>(measured.per_query[j]);
    }
  }
  const double pairs = static_cast<double>(measured.pairs), vectors = static_cast<double>(measured.vectors);
  DistortionRow row;
  row.spec = codec->spec();
  row.code_bytes = codec->code_bytes();
  row.mse = squared_error / n;
  row.ip_bias = sum_error / pairs;
  double spread = 0;
  for (size_t i = 0; i < n; ++i)
    if (measured.per_vector[i]) spread += (per_vector[i] - row.ip_bias) * (per_vector[i] - row.ip_bias);
  row.ip_bias_stderr = std::sqrt(spread / (vectors - 1) / vectors);
  row.ip_bias_factor = sum_cross / sum_truth_sq;
  // Variance around the mean error at each true inner product: the estimator's spread, not the
  // spread of a biased codec's bias over the range of rho.
  double within = 0;
  for (size_t j = 0; j < q; ++j) within += per_query_sq[j] - per_query[j] * per_query[j];  // 0 for unused
  row.ip_var_d = dim * within / measured.queries;
  return row;
}

}  // namespace

std::vector<DistortionRow> run_distortion(const DistortionConfig& config) {
  require(config.vectors >= 2, "distortion: --vectors must be >= 2, got {}", config.vectors);
  require(config.queries >= 1, "distortion: --queries must be >= 1, got {}", config.queries);
  require(config.codec_seeds >= 1, "distortion: --codec-seeds must be >= 1, got {}", config.codec_seeds);
  require(!config.bits.empty() && !config.codecs.empty(), "distortion: give at least one codec and one bit width");
  size_t dim = 0;
  std::vector<float> base, queries;
  make_inputs(config, dim, base, queries);
  const size_t n = config.vectors, q = config.queries;
  std::vector<double> rho(q);
  for (size_t j = 0; j < q; ++j) rho[j] = 0.9 * (j + 0.5) / q;
  // Exact <z_j, x_i>.
  std::vector<double> truth_z(n * q);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < q; ++j) truth_z[i * q + j] = simd::reference::dot(&base[i * dim], &queries[j * dim], dim);
  const MeasuredPairs measured(truth_z, n, q);

  std::vector<DistortionRow> rows;
  for (const std::string& name : config.codecs) {
    for (int bits : config.bits) {
      DistortionRow mean;
      double stderr_sq = 0, bias_sq = 0;
      for (size_t k = 0; k < config.codec_seeds; ++k) {
        const DistortionRow r = measure(spec_for(name, bits, dim, config.options), config.seed + k, dim, base,
                                        queries, rho, truth_z, measured, n, q);
        mean.mse += r.mse / config.codec_seeds;
        mean.ip_bias += r.ip_bias / config.codec_seeds;
        mean.ip_bias_factor += r.ip_bias_factor / config.codec_seeds;
        mean.ip_var_d += r.ip_var_d / config.codec_seeds;
        stderr_sq += r.ip_bias_stderr * r.ip_bias_stderr;
        bias_sq += r.ip_bias * r.ip_bias;
        mean.spec = r.spec;
        mean.code_bytes = r.code_bytes;
      }
      // With several seeds the seeds are the independent samples: vectors of real data share their
      // quantization errors under one rotation, so the per-vector standard error would be too small.
      const double k = static_cast<double>(config.codec_seeds);
      mean.ip_bias_stderr = k > 1 ? std::sqrt(std::max(0.0, bias_sq / k - mean.ip_bias * mean.ip_bias) / (k - 1))
                                  : std::sqrt(stderr_sq);
      mean.codec = name;
      mean.bits = bits;
      mean.dim = dim;
      const double quarter = std::pow(4.0, -bits);
      if (config.input == "random") mean.mse_lower_bound = quarter;
      if (name == "tq_mse") mean.mse_upper_bound = std::sqrt(3.0) * M_PI / 2.0 * quarter;
      if (name == "tq_prod") mean.ip_var_d_upper_bound = std::sqrt(3.0) * M_PI * M_PI * quarter;
      rows.push_back(mean);
    }
  }
  return rows;
}

}  // namespace kvsketch
