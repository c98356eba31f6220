// MagicPIG (Chen et al.): SimHash with K bits x L tables over centred keys; a key is sampled when
// it collides with the query in at least `hits` tables (2 in the paper), and weighted by
// 1 / u_i, u_i = P[Binomial(L, p_i^K) >= hits], p_i = 1 - angle(q, k_i - c) / pi (Eq. 10-11).
//
// Decisions (specs/magicpig.md section 6): the centre is kept up to date as tokens arrive, in
// epochs: an append that at least doubles the tokens known since the last epoch opened (the
// prefill does) opens a new epoch whose centre is the mean of every key so far, its own included;
// a token is hashed, and its u_i computed, with its epoch's centre, so that the hash and u_i always
// use the same centred key, and nothing is ever rehashed (at most log2(n) epochs). The logits use
// the raw keys: every score in the softmax has the same (zero) shift, so the result merges with
// the exact sinks and window as it is.
// Projections are Gaussian, one d x (K L) matrix per selector (shared by its heads; the paper
// shares one across the model). The tables (lsh_tables.hpp) hold per token L u16 ids in
// bucket-sorted blocks plus the blocks' bucket starts, and ||k_i - c|| (fp32): about 310 bytes per
// token at (10, 150) (magicpig_bytes_per_token), against 512 for fp16 K+V at d = 128 and 256 at
// d = 64, where cap=1 limits the tables. A query reads one bucket per table and
// block, then only the keys it samples.
#include <algorithm>
#include <cmath>
#include <limits>

#include "codec/spec_parser.hpp"
#include "core/require.hpp"
#include "kvsketch/random.hpp"
#include "simd/kernels.hpp"
#include "sparse/body_rows.hpp"
#include "sparse/magicpig.hpp"

namespace kvsketch {
namespace {

constexpr double kPi = 3.14159265358979323846;

// -log u, finite even where u underflows.
double exact_neg_log_inclusion(double cosine, int bits, int tables, int hits) {
  const double u = magicpig_inclusion_probability(cosine, bits, tables, hits);
  return -std::log(std::max(u, std::numeric_limits<double>::min()));
}

}  // namespace

double magicpig_inclusion_probability(double cosine, int bits, int tables, int hits) {
  const double p = 1.0 - std::acos(std::clamp(cosine, -1.0, 1.0)) / kPi;
  const double s = std::pow(p, bits);
  if (s <= 0.0) return 0.0;
  if (s >= 1.0) return 1.0;
  // P[Binomial(L, s) >= hits] = 1 - the lower tail (hits terms, by the term ratio); when that is
  // tiny the subtraction would cancel, and the upper tail is summed directly instead.
  const double ratio = s / (1.0 - s);
  double term = std::exp(tables * std::log1p(-s)), lower = 0.0;  // j = 0
  for (int j = 0; j < hits; ++j) {
    lower += term;
    term *= static_cast<double>(tables - j) / (j + 1) * ratio;
  }
  if (1.0 - lower > 1e-6) return 1.0 - lower;
  double upper = 0.0;  // term is the j = hits term
  for (int j = hits; j <= tables && term > upper * 1e-18; ++j) {
    upper += term;
    term *= static_cast<double>(tables - j) / (j + 1) * ratio;
  }
  return std::min(upper, 1.0);
}

MagicPig::MagicPig(size_t dim, int bits, int tables, int hits, bool center, uint64_t seed)
    : dim_(dim), bits_(bits), tables_(tables), hits_(hits), center_(center), tables_index_(std::clamp(bits, 1, 32), std::max(tables, 1)) {
  require(bits >= 1 && bits <= 32, "magicpig: K (bits per table) must be in 1..32, got {}", bits);
  require(tables >= 1 && tables <= 4096, "magicpig: L (tables) must be in 1..4096, got {}", tables);
  require(hits >= 1 && hits <= tables, "magicpig: hits must be in 1..L = {}, got {}", tables, hits);
  const size_t rows = static_cast<size_t>(bits) * static_cast<size_t>(tables);
  std::vector<float> columns(dim * rows);  // column-major: column c holds coordinate c of every direction
  RandomStream rng(seed, StreamPurpose::kSketch, {0x3a61c});
  for (float& value : columns) value = static_cast<float>(rng.gaussian());
  // Stored as panels of kPanelRows directions, each column-major: a panel's columns are contiguous,
  // so hashing streams through memory (the whole matrix does not fit a core's cache).
  std::vector<float> panels(dim * rows);
  for (size_t first = 0; first < rows; first += kPanelRows) {
    const size_t height = std::min(kPanelRows, rows - first);
    for (size_t c = 0; c < dim; ++c)
      for (size_t r = 0; r < height; ++r) panels[first * dim + c * height + r] = columns[c * rows + first + r];
  }
  projection_ = std::make_shared<const std::vector<float>>(std::move(panels));
  std::vector<double> grid(kGridIntervals + 1);
  for (size_t i = 0; i <= kGridIntervals; ++i) {
    const double cosine = kGridFloor + (1.0 - kGridFloor) * static_cast<double>(i) / kGridIntervals;
    grid[i] = exact_neg_log_inclusion(cosine, bits, tables, hits);
  }
  neg_log_u_grid_ = std::make_shared<const std::vector<double>>(std::move(grid));
}

double magicpig_bytes_per_token(int bits, int tables) {
  const double per_table = bits <= LshTables::kMostBucketedBits
                               ? 2.0 + 2.0 * static_cast<double>((size_t{1} << bits) + 1) / kMagicPigCapTokens
                           : bits <= 16 ? 2.5
                                        : 5.0;
  return per_table * tables + sizeof(float);
}

int magicpig_tables_within(int bits, size_t dim, double cap) {
  const double budget = 0.9 * cap * 4.0 * static_cast<double>(dim);
  const double per_table = magicpig_bytes_per_token(bits, 1) - magicpig_bytes_per_token(bits, 0);
  return static_cast<int>(std::clamp(std::floor((budget - magicpig_bytes_per_token(bits, 0)) / per_table), 0.0, 4096.0));
}

std::string MagicPig::spec() const {
  return fmt::format("magicpig:K={},L={},hits={},center={}", bits_, tables_, hits_, center_ ? 1 : 0);
}

size_t MagicPig::index_bytes() const {
  return tables_index_.bytes() + norms_.capacity() * sizeof(float) + centres_.capacity() * sizeof(float) +
         epoch_starts_.capacity() * sizeof(uint32_t) + key_sum_.capacity() * sizeof(double);
}

void MagicPig::codes_of(const float* x, std::vector<uint32_t>& out) const {
  const size_t rows = static_cast<size_t>(bits_) * static_cast<size_t>(tables_);
  std::vector<float> projected(rows);
  for (size_t first = 0; first < rows; first += kPanelRows) {
    const size_t height = std::min(kPanelRows, rows - first);
    simd::matvec_columns(projection_->data() + first * dim_, height, dim_, x, projected.data() + first);
  }
  out.assign(static_cast<size_t>(tables_), 0);
  for (size_t t = 0; t < out.size(); ++t) {
    const float* row = projected.data() + t * static_cast<size_t>(bits_);
    uint32_t code = 0;
    for (int b = 0; b < bits_; ++b) code |= static_cast<uint32_t>(row[b] > 0.0f) << b;  // no branch: signs are coin flips
    out[t] = code;
  }
}

// -log u on a grid of cosines, interpolated; exact below the grid's floor, where log u falls
// steeply (no sampled key sits there in practice).
double MagicPig::neg_log_inclusion(double cosine) const {
  const double position = (std::clamp(cosine, -1.0, 1.0) - kGridFloor) / (1.0 - kGridFloor) * kGridIntervals;
  if (position < 0.0) return exact_neg_log_inclusion(cosine, bits_, tables_, hits_);
  const size_t cell = std::min(static_cast<size_t>(position), kGridIntervals - 1);
  const double fraction = position - static_cast<double>(cell);
  const std::vector<double>& grid = *neg_log_u_grid_;
  return grid[cell] + fraction * (grid[cell + 1] - grid[cell]);
}

void MagicPig::append(const float* keys, const float*, size_t n) {
  if (n == 0) return;
  require_finite(keys, n, dim_, "keys");
  if (key_sum_.empty()) key_sum_.assign(dim_, 0.0);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < dim_; ++j) key_sum_[j] += keys[i * dim_ + j];
  if (epoch_starts_.empty() || tokens_ + n >= 2 * tokens_at_refresh_) {
    tokens_at_refresh_ = tokens_ + n;
    epoch_starts_.reserve(epoch_starts_.size() + 1);  // exact capacities: index_bytes() counts them
    centres_.reserve(centres_.size() + dim_);
    epoch_starts_.push_back(static_cast<uint32_t>(tokens_));
    for (size_t j = 0; j < dim_; ++j)
      centres_.push_back(center_ ? static_cast<float>(key_sum_[j] / static_cast<double>(tokens_at_refresh_)) : 0.0f);
  }
  const float* centre = centres_.data() + centres_.size() - dim_;
  std::vector<float> centred(dim_);
  std::vector<uint32_t> codes;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < dim_; ++j) centred[j] = keys[i * dim_ + j] - centre[j];
    codes_of(centred.data(), codes);
    tables_index_.add(codes.data());
    push_back_in_steps(norms_, std::sqrt(simd::sum_of_squares(centred.data(), dim_)));
  }
  tokens_ += n;
}

TokenSelection MagicPig::select(const float* query, const BodyView& body, uint64_t) const {
  require_indexed_body(body, tokens_, dim_, "magicpig");
  TokenSelection s;
  if (tokens_ == 0) return s;
  std::vector<uint32_t> query_codes;
  codes_of(query, query_codes);  // the query is not centred (only the sign pattern matters)
  s.tokens = tables_index_.colliding(query_codes.data(), hits_);
  const size_t n = s.tokens.size();
  s.scores.resize(n);
  body_key_scores(query, body, s.tokens.data(), n, 1.0f, s.scores.data());
  s.log_weights.resize(n);
  const double query_norm = std::sqrt(simd::sum_of_squares(query, dim_));
  std::vector<double> query_centre(epoch_starts_.size());  // q . c_e per epoch
  for (size_t e = 0; e < query_centre.size(); ++e) query_centre[e] = simd::dot(query, centres_.data() + e * dim_, dim_);
  size_t epoch = 0;
  for (size_t k = 0; k < n; ++k) {
    const uint32_t i = s.tokens[k];  // ascending: the epoch only moves forward
    while (epoch + 1 < epoch_starts_.size() && epoch_starts_[epoch + 1] <= i) ++epoch;
    const double cosine =
        norms_[i] > 0.0f && query_norm > 0.0 ? (s.scores[k] - query_centre[epoch]) / (query_norm * norms_[i]) : 1.0;
    // Eq. 11: softmax(q k / sqrt(d) - log u).
    s.log_weights[k] = static_cast<float>(neg_log_inclusion(cosine));
  }
  return s;
}

}  // namespace kvsketch
