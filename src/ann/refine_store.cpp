#include "ann/refine_store.hpp"

#include <algorithm>
#include <cmath>

#include "core/require.hpp"
#include "kvsketch/half.hpp"
#include "simd/kernels.hpp"

namespace kvsketch {

Refine parse_refine(const std::string& name) {
  if (name == "none") return Refine::kNone;
  if (name == "fp16") return Refine::kFp16;
  if (name == "int8") return Refine::kInt8;
  throw Error("refine=" + name + " is not none, fp16 or int8");
}

std::string refine_name(Refine refine) {
  switch (refine) {
    case Refine::kFp16: return "fp16";
    case Refine::kInt8: return "int8";
    default: return "none";
  }
}

size_t RefineStore::bytes_per_vector() const {
  switch (kind_) {
    case Refine::kFp16: return 2 * dim_;
    case Refine::kInt8: return dim_ + sizeof(float);
    default: return 0;
  }
}

void RefineStore::append(const float* rows, size_t n) {
  if (kind_ == Refine::kNone) return;
  if (kind_ == Refine::kFp16) {
    auto& halves = halves_.mutate();
    for (size_t i = 0; i < n * dim_; ++i) halves.push_back(float_to_half(rows[i]));
  } else {
    auto& bytes = bytes_.mutate();
    auto& scales = scales_.mutate();
    for (size_t r = 0; r < n; ++r) {
      const float* row = rows + r * dim_;
      float largest = 0.0f;
      for (size_t j = 0; j < dim_; ++j) largest = std::max(largest, std::fabs(row[j]));
      const float scale = largest > 0.0f ? largest / 127.0f : 1.0f;
      scales.push_back(scale);
      for (size_t j = 0; j < dim_; ++j)
        bytes.push_back(static_cast<int8_t>(std::clamp(std::lround(row[j] / scale), -127L, 127L)));
    }
  }
  rows_ += n;
}

void RefineStore::keep(const std::vector<bool>& kept) {
  if (kind_ == Refine::kNone) {
    rows_ = static_cast<size_t>(std::count(kept.begin(), kept.end(), true));
    return;
  }
  auto& halves = halves_.mutate();
  auto& scales = scales_.mutate();
  auto& bytes = bytes_.mutate();
  size_t out = 0;
  for (size_t row = 0; row < rows_; ++row) {
    if (!kept[row]) continue;
    if (out != row) {
      if (kind_ == Refine::kFp16) {
        std::copy_n(halves.begin() + row * dim_, dim_, halves.begin() + out * dim_);
      } else {
        std::copy_n(bytes.begin() + row * dim_, dim_, bytes.begin() + out * dim_);
        scales[out] = scales[row];
      }
    }
    ++out;
  }
  rows_ = out;
  if (kind_ == Refine::kFp16) halves.resize(out * dim_);
  if (kind_ == Refine::kInt8) {
    bytes.resize(out * dim_);
    scales.resize(out);
  }
}

void RefineStore::decode(size_t row, float* out) const {
  if (kind_ == Refine::kFp16) {
    const uint16_t* x = halves_.data() + row * dim_;
    for (size_t j = 0; j < dim_; ++j) out[j] = half_to_float(x[j]);
  } else {
    const int8_t* x = bytes_.data() + row * dim_;
    const float scale = scales_[row];
    for (size_t j = 0; j < dim_; ++j) out[j] = scale * static_cast<float>(x[j]);
  }
}

void RefineStore::similarity_terms(const float* q, size_t row, float* scratch, float& dot, float& square) const {
  decode(row, scratch);
  dot = simd::fixed_order_dot(q, scratch, dim_);
  square = simd::fixed_order_dot(scratch, scratch, dim_);
}

size_t RefineStore::first_non_finite_row() const {
  if (kind_ == Refine::kFp16) {
    for (size_t i = 0; i < halves_.size(); ++i)
      if (!half_is_finite(halves_[i])) return i / dim_;
  }
  if (kind_ == Refine::kInt8) {
    for (size_t row = 0; row < scales_.size(); ++row)
      if (!std::isfinite(scales_[row]) || !(scales_[row] > 0.0f)) return row;
  }
  return rows_;
}

}  // namespace kvsketch
