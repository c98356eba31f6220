#include "ann/fast_scan_store.hpp"

#include <algorithm>
#include <cmath>

#include "codec/pca_turboquant.hpp"
#include "codec/spec_of.hpp"
#include "core/huge_pages.hpp"
#include "core/require.hpp"
#include "simd/fast_scan_kernels.hpp"

namespace kvsketch {
namespace {

constexpr size_t kBlockRows = simd::kFastScanBlockRows;

// The TurboQuant whose codes codec writes: itself, or tq_pca while it has no basis.
const TurboQuant* scanned_turboquant(const VectorCodec& codec) {
  if (const auto* pca = dynamic_cast<const PcaTurboQuant*>(&codec)) return pca->plain();
  return dynamic_cast<const TurboQuant*>(&codec);
}

const TurboQuant& as_turboquant(const VectorCodec& codec) {
  require(FastScanStore::supports(codec), "fast scan: codec {} is not TurboQuant_mse at 1, 2 or 4 bits", SpecOf{codec});
  return *scanned_turboquant(codec);
}

}  // namespace

bool FastScanStore::supports(const VectorCodec& codec) {
  const TurboQuant* turboquant = scanned_turboquant(codec);
  if (turboquant == nullptr) return false;
  const auto layout = turboquant->scan_layout();
  return layout && (layout->bits == 1 || layout->bits == 2 || layout->bits == 4);
}

FastScanStore::FastScanStore(const VectorCodec& codec, bool log_norms)
    : codec_(as_turboquant(codec)), layout_(*codec_.scan_layout()), dim_(codec.dim()), log_norms_(log_norms) {
  const size_t nibbles = 2 * layout_.index_bytes;
  groups_ = (nibbles + simd::kFastScanGroupPad - 1) / simd::kFastScanGroupPad * simd::kFastScanGroupPad;
  tail_bytes_ = codec.code_bytes() - layout_.index_bytes;
  if (log_norms) {
    require(tail_bytes_ == norm_bytes(layout_.norm) && layout_.norm_offset == layout_.index_bytes,
            "fast scan: codec {} keeps more than a norm after its indices; its norms cannot be log-coded", SpecOf{codec});
    tail_bytes_ = 1;
  }
}

void FastScanStore::set_norm_scale(const log_norm::Scale& scale) {
  require(log_norms_, "fast scan: a norm scale without log-coded norms");
  require(rows_ == 0, "fast scan: the scale of log-coded norms changes only while the store is empty");
  require(log_norm::valid(scale), "fast scan: the norms' scale (reference {}, {} steps per octave) is not valid",
          scale.reference, scale.steps);
  scale_ = scale;
}

void FastScanStore::store_tail(const uint8_t* row, uint8_t* out) const {
  if (!log_norms_)
    std::copy_n(row + layout_.index_bytes, tail_bytes_, out);
  else
    *out = log_norm::encode(load_norm(layout_.norm, row + layout_.norm_offset), scale_);
}

uint8_t FastScanStore::nibble(size_t row, size_t group) const {
  const uint8_t byte = blocks_[((row / kBlockRows) * groups_ + group) * 16 + row % 16];
  return row % kBlockRows < 16 ? byte & 15 : byte >> 4;
}

void FastScanStore::set_nibble(size_t row, size_t group, uint8_t value) {
  uint8_t& byte = blocks_.mutate()[((row / kBlockRows) * groups_ + group) * 16 + row % 16];
  byte = row % kBlockRows < 16 ? static_cast<uint8_t>((byte & 0xF0) | value)
                               : static_cast<uint8_t>((byte & 0x0F) | (value << 4));
}

float FastScanStore::scale(size_t row) const {
  if (log_norms_) return log_norm::decode(tails_[row], scale_);
  return load_norm(layout_.norm, tails_.data() + row * tail_bytes_ + (layout_.norm_offset - layout_.index_bytes));
}

size_t FastScanStore::first_non_finite_row() const {
  for (size_t row = 0; row < rows_; ++row)
    if (!std::isfinite(scale(row))) return row;
  return rows_;
}

void FastScanStore::append(const CodeBuffer& encoded) {
  const size_t n = encoded.size(), total = rows_ + n, block_bytes = groups_ * 16;
  // New bytes are not zeroed by resize: the whole blocks packed below are written in full, and the
  // blocks that rows fill one at a time (read-modify-write of nibbles) are zeroed here.
  auto &blocks = blocks_.mutate(), &tails = tails_.mutate();
  const size_t old_bytes = blocks.size(), whole_blocks = rows_ % kBlockRows == 0 ? n / kBlockRows : 0;
  blocks.resize((total + kBlockRows - 1) / kBlockRows * block_bytes);
  std::fill(blocks.begin() + static_cast<std::ptrdiff_t>(old_bytes + whole_blocks * block_bytes), blocks.end(), 0);
  tails.resize(total * tail_bytes_);
  size_t i = 0;
  // Whole blocks of 32 rows, transposed at once.
  for (; rows_ % kBlockRows == 0 && i + kBlockRows <= n; i += kBlockRows, rows_ += kBlockRows) {
    uint8_t* block = blocks.data() + (rows_ / kBlockRows) * groups_ * 16;
    const uint8_t* rows[kBlockRows];
    for (size_t j = 0; j < kBlockRows; ++j) rows[j] = encoded.row(i + j);
    simd::fast_scan_pack_block(rows, layout_.index_bytes, block);
    for (size_t j = 0; j < kBlockRows; ++j) store_tail(rows[j], tails.data() + (rows_ + j) * tail_bytes_);
  }
  for (; i < n; ++i, ++rows_) {
    const size_t r = rows_;
    const uint8_t* row = encoded.row(i);
    // Nibble g of the row goes to byte g * 16 of its block's slot (rows 16..31: the high half).
    uint8_t* slot = blocks.data() + (r / kBlockRows) * groups_ * 16 + r % 16;
    const bool high = r % kBlockRows >= 16;
    for (size_t k = 0; k < layout_.index_bytes; ++k) {
      const uint8_t low_nibble = row[k] & 15, high_nibble = row[k] >> 4;
      uint8_t* a = slot + 2 * k * 16;
      uint8_t* b = a + 16;
      *a = high ? static_cast<uint8_t>((*a & 0x0F) | (low_nibble << 4)) : static_cast<uint8_t>((*a & 0xF0) | low_nibble);
      *b = high ? static_cast<uint8_t>((*b & 0x0F) | (high_nibble << 4)) : static_cast<uint8_t>((*b & 0xF0) | high_nibble);
    }
    store_tail(row, tails.data() + r * tail_bytes_);
  }
}

void FastScanStore::reserve(size_t rows) {
  const size_t blocks = (rows + kBlockRows - 1) / kBlockRows * groups_ * 16;
  reserve_huge(blocks_.mutate(), blocks);
  reserve_huge(tails_.mutate(), rows * tail_bytes_);
}

void FastScanStore::move_row(size_t from, size_t to) {
  for (size_t g = 0; g < groups_; ++g) set_nibble(to, g, nibble(from, g));
  auto& tails = tails_.mutate();
  std::copy_n(tails.data() + from * tail_bytes_, tail_bytes_, tails.data() + to * tail_bytes_);
}

void FastScanStore::truncate(size_t rows) {
  for (size_t row = rows; row < rows_; ++row)
    for (size_t g = 0; g < groups_; ++g) set_nibble(row, g, 0);  // padding rows stay zero
  rows_ = rows;
  blocks_.mutate().resize((rows + kBlockRows - 1) / kBlockRows * groups_ * 16);
  tails_.mutate().resize(rows * tail_bytes_);
}

FastScanStore::Tables FastScanStore::tables(const float* query) const {
  std::vector<float> rotated(dim_);
  codec_.rotate(query, rotated.data());
  const int bits = layout_.bits;
  const size_t per_group = static_cast<size_t>(4 / bits), mask = (1u << bits) - 1;
  Tables t;
  t.exact.assign(groups_ * 16, 0.0f);
  for (size_t g = 0; g < groups_; ++g)
    for (size_t c = 0; c < 16; ++c) {
      float value = 0.0f;
      for (size_t k = 0; k < per_group; ++k) {
        const size_t j = g * per_group + k;
        if (j < dim_) value += rotated[j] * layout_.centroids[(c >> (k * bits)) & mask];
      }
      t.exact[g * 16 + c] = value;
    }
  // One step for all groups (so that sums stay comparable), each group offset by its minimum.
  std::vector<float> minimum(groups_);
  float widest = 0.0f;
  for (size_t g = 0; g < groups_; ++g) {
    const auto [low, high] = std::minmax_element(t.exact.begin() + g * 16, t.exact.begin() + g * 16 + 16);
    minimum[g] = *low;
    widest = std::max(widest, *high - *low);
    t.bias += *low;
  }
  t.step = widest > 0.0f ? widest / 255.0f : 1.0f;
  t.quantized.resize(groups_ * 16);
  for (size_t g = 0; g < groups_; ++g)
    for (size_t c = 0; c < 16; ++c)
      t.quantized[g * 16 + c] =
          static_cast<uint8_t>(std::min(255L, std::lround((t.exact[g * 16 + c] - minimum[g]) / t.step)));
  return t;
}

void FastScanStore::approximate(const Tables& t, size_t first_block, size_t blocks, uint32_t* sums,
                                float* out) const {
  simd::fast_scan_sums(blocks_.data() + first_block * groups_ * 16, groups_, blocks, t.quantized.data(), sums);
  const size_t first = first_block * kBlockRows;
  for (size_t i = 0; i < blocks * kBlockRows; ++i)
    out[i] = first + i < rows_ ? scale(first + i) * (t.step * static_cast<float>(sums[i]) + t.bias) : 0.0f;
}

float FastScanStore::exact(const Tables& t, size_t row) const {
  const uint8_t* slot = blocks_.data() + (row / kBlockRows) * groups_ * 16 + row % 16;
  const int shift = row % kBlockRows < 16 ? 0 : 4;
  const float* table = t.exact.data();
  float sum = 0.0f;
  for (size_t g = 0; g < groups_; ++g) sum += table[g * 16 + ((slot[g * 16] >> shift) & 15)];
  return scale(row) * sum;
}

}  // namespace kvsketch
