// Highway implementations of code_kernels.hpp, compiled per instruction set.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/simd/code_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kvsketch/bitpack.hpp"
#include "simd/code_kernels.hpp"

HWY_BEFORE_NAMESPACE();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Eight b-bit indices from the low 8b bits of `word`: one bit-deposit where BMI2 is there, shifts
// elsewhere.
template <int kBits>
HWY_INLINE uint64_t SpreadEight(uint64_t word) {
  constexpr uint64_t kLow = (uint64_t{1} << kBits) - 1;
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  return _pdep_u64(word, kLow * 0x0101010101010101ull);
#else
  uint64_t out = 0;
  for (int k = 0; k < 8; ++k) out |= ((word >> (kBits * k)) & kLow) << (8 * k);
  return out;
#endif
}

template <int kBits>
void UnpackIndicesBits(const uint8_t* packed, size_t count, uint8_t* indices) {
  const size_t groups = count / 8, bytes = packed_bytes(count, kBits);
  size_t g = 0;
  // Whole 8-byte loads while they stay inside the codes (narrow copies would stall the load).
  for (; g * kBits + 8 <= bytes; ++g) {
    uint64_t word;
    std::memcpy(&word, packed + g * kBits, 8);
    const uint64_t spread = SpreadEight<kBits>(word);
    std::memcpy(indices + 8 * g, &spread, 8);
  }
  for (; g < groups; ++g) {
    uint64_t word = 0;
    std::memcpy(&word, packed + g * kBits, kBits);
    const uint64_t spread = SpreadEight<kBits>(word);
    std::memcpy(indices + 8 * g, &spread, 8);
  }
  // The tail starts on a byte boundary (8 indices of b bits are b bytes).
  if (count % 8) unpack_bits(packed + groups * kBits, count % 8, kBits, indices + 8 * groups);
}

void UnpackIndicesImpl(const uint8_t* packed, size_t count, int bits, uint8_t* indices) {
  switch (bits) {
    case 1: return UnpackIndicesBits<1>(packed, count, indices);
    case 2: return UnpackIndicesBits<2>(packed, count, indices);
    case 3: return UnpackIndicesBits<3>(packed, count, indices);
    case 4: return UnpackIndicesBits<4>(packed, count, indices);
    case 5: return UnpackIndicesBits<5>(packed, count, indices);
    case 6: return UnpackIndicesBits<6>(packed, count, indices);
    case 7: return UnpackIndicesBits<7>(packed, count, indices);
    default: std::memcpy(indices, packed, count);
  }
}

void LookupFloatsImpl(const uint8_t* indices, size_t count, const float* table, size_t table_size, float* out) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<uint8_t, decltype(df)> du8;
  const size_t lanes = hn::Lanes(df);
  size_t j = 0;
  if (table_size <= 2 * lanes && lanes >= 4) {
    // The table padded to two vectors; indices >= lanes come from the second.
    HWY_ALIGN float padded[2 * HWY_MAX_BYTES / sizeof(float)] = {};
    std::memcpy(padded, table, table_size * sizeof(float));
    const auto low = hn::Load(df, padded), high = hn::Load(df, padded + lanes);
    const auto lane_count = hn::Set(di, static_cast<int32_t>(lanes));
    const auto lane_mask = hn::Set(di, static_cast<int32_t>(lanes - 1));
    for (; j + lanes <= count; j += lanes) {
      const auto index = hn::PromoteTo(di, hn::LoadU(du8, indices + j));
      const auto in_low = hn::TableLookupLanes(low, hn::IndicesFromVec(df, hn::And(index, lane_mask)));
      if (table_size <= lanes) {
        hn::StoreU(in_low, df, out + j);
        continue;
      }
      const auto in_high = hn::TableLookupLanes(high, hn::IndicesFromVec(df, hn::And(index, lane_mask)));
      const auto in_first = hn::RebindMask(df, hn::Lt(index, lane_count));
      hn::StoreU(hn::IfThenElse(in_first, in_low, in_high), df, out + j);
    }
  }
  for (; j < count; ++j) out[j] = table[indices[j]];
}

// Table lookup of up to 2 * lanes floats by the lane indices in `index` (int32 lanes).
template <class D, class DI>
HWY_INLINE hn::Vec<D> LookupTwoVectors(D df, DI di, hn::Vec<D> low, hn::Vec<D> high, hn::Vec<DI> index,
                                       bool one_vector) {
  const size_t lanes = hn::Lanes(df);
  const auto wrapped = hn::IndicesFromVec(df, hn::And(index, hn::Set(di, static_cast<int32_t>(lanes - 1))));
  const auto in_low = hn::TableLookupLanes(low, wrapped);
  if (one_vector) return in_low;
  const auto in_first = hn::RebindMask(df, hn::Lt(index, hn::Set(di, static_cast<int32_t>(lanes))));
  return hn::IfThenElse(in_first, in_low, hn::TableLookupLanes(high, wrapped));
}

#if HWY_TARGET != HWY_SCALAR
// Rows of packed b-bit indices to floats, `lanes` indices per step: the step's bytes are loaded
// once (16 bytes cover 16 indices of up to 8 bits), each lane picks the two bytes that hold its
// index, shifts and masks; then the centroid table lookup stays in registers.
template <int kBits>
bool DecodeIndexRowsBits(const uint8_t* codes, size_t stride, size_t n, size_t d, const float* table,
                         size_t table_size, float* out, size_t out_stride) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::Repartition<uint8_t, decltype(du)> du8;
  const size_t lanes = hn::Lanes(df);
  if (lanes < 4 || lanes > 16 || (lanes * kBits) % 8 != 0 || table_size > 2 * lanes) return false;
  HWY_ALIGN uint8_t picks[HWY_MAX_BYTES] = {};
  HWY_ALIGN uint32_t shifts[HWY_MAX_BYTES / 4] = {};
  for (size_t k = 0; k < lanes; ++k) {
    const size_t bit = kBits * k;
    for (size_t t = 0; t < 4; ++t) picks[4 * k + t] = static_cast<uint8_t>(std::min<size_t>(bit / 8 + t, 15));
    shifts[k] = static_cast<uint32_t>(bit % 8);
  }
  const auto pick = hn::Load(du8, picks);
  const auto shift = hn::Load(du, shifts);
  const auto mask = hn::Set(du, (1u << kBits) - 1u);
  HWY_ALIGN float padded_table[2 * HWY_MAX_BYTES / sizeof(float)] = {};
  std::memcpy(padded_table, table, table_size * sizeof(float));
  const auto low = hn::Load(df, padded_table), high = hn::Load(df, padded_table + lanes);
  const bool one_vector = table_size <= lanes;

  const size_t step_bytes = lanes * kBits / 8, steps = d / lanes;
  const size_t row_bytes = packed_bytes(d, kBits);
  // The last 16-byte load may run past the row's indices; where it would run past the row, the
  // last row of the block is read from a padded copy.
  const bool overreads = steps > 0 && (steps - 1) * step_bytes + 16 > stride;
  uint8_t last_row[1024 + 16] = {};
  if (overreads && row_bytes > 1024) return false;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* row = codes + i * stride;
    if (overreads && i + 1 == n) {
      std::memcpy(last_row, row, row_bytes);
      row = last_row;
    }
    float* target = out + i * out_stride;
    for (size_t step = 0; step < steps; ++step) {
      // The 16 bytes repeated in every 128-bit block: byte shuffles stay within blocks.
      const auto bytes = hn::LoadDup128(du8, row + step * step_bytes);
      const auto words = hn::BitCast(du, hn::TableLookupBytes(bytes, pick));
      const auto index = hn::BitCast(di, hn::And(hn::Shr(words, shift), mask));
      hn::StoreU(LookupTwoVectors(df, di, low, high, index, one_vector), df, target + step * lanes);
    }
    for (size_t j = steps * lanes; j < d; ++j) {
      const size_t bit = kBits * j;
      unsigned word = row[bit / 8];
      if (bit / 8 + 1 < row_bytes) word |= static_cast<unsigned>(row[bit / 8 + 1]) << 8;
      target[j] = table[(word >> (bit % 8)) & ((1u << kBits) - 1u)];
    }
  }
  return true;
}
#endif

void DecodeIndexRowsImpl(const uint8_t* codes, size_t stride, size_t n, size_t d, int bits, const float* table,
                         size_t table_size, float* out, size_t out_stride) {
  bool done = false;
#if HWY_TARGET != HWY_SCALAR
  switch (bits) {
    case 1: done = DecodeIndexRowsBits<1>(codes, stride, n, d, table, table_size, out, out_stride); break;
    case 2: done = DecodeIndexRowsBits<2>(codes, stride, n, d, table, table_size, out, out_stride); break;
    case 3: done = DecodeIndexRowsBits<3>(codes, stride, n, d, table, table_size, out, out_stride); break;
    case 4: done = DecodeIndexRowsBits<4>(codes, stride, n, d, table, table_size, out, out_stride); break;
    default: break;
  }
#endif
  if (done) return;
  std::vector<uint8_t> indices(d);
  for (size_t i = 0; i < n; ++i) {
    UnpackIndicesImpl(codes + i * stride, d, bits, indices.data());
    LookupFloatsImpl(indices.data(), d, table, table_size, out + i * out_stride);
  }
}

void SignsToFloatsImpl(const uint8_t* packed, size_t count, float plus, float* out) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  const auto positive = hn::Set(df, plus), negative = hn::Set(df, -plus);
  size_t j = 0;
  if (lanes >= 8 && lanes % 8 == 0) {
    for (; j + lanes <= count; j += lanes) {
      const auto mask = hn::LoadMaskBits(df, packed + j / 8);
      hn::StoreU(hn::IfThenElse(mask, positive, negative), df, out + j);
    }
  }
  for (; j < count; ++j) out[j] = ((packed[j >> 3] >> (j & 7)) & 1) ? plus : -plus;
}

void Int8ToFloatsImpl(const uint8_t* codes, size_t count, float* out) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> di8;
  const size_t lanes = hn::Lanes(df);
  const int8_t* signed_codes = reinterpret_cast<const int8_t*>(codes);
  size_t j = 0;
  for (; j + lanes <= count; j += lanes)
    hn::StoreU(hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(di8, signed_codes + j))), df, out + j);
  for (; j < count; ++j) out[j] = static_cast<float>(signed_codes[j]);
}

}  // namespace HWY_NAMESPACE
}  // namespace kvsketch::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvsketch::simd {

HWY_EXPORT(UnpackIndicesImpl);
HWY_EXPORT(LookupFloatsImpl);
HWY_EXPORT(DecodeIndexRowsImpl);
HWY_EXPORT(SignsToFloatsImpl);
HWY_EXPORT(Int8ToFloatsImpl);

void unpack_indices(const uint8_t* packed, size_t count, int bits, uint8_t* indices) {
  HWY_DYNAMIC_DISPATCH(UnpackIndicesImpl)(packed, count, bits, indices);
}
void lookup_floats(const uint8_t* indices, size_t count, const float* table, size_t table_size, float* out) {
  HWY_DYNAMIC_DISPATCH(LookupFloatsImpl)(indices, count, table, table_size, out);
}
void decode_index_rows(const uint8_t* codes, size_t stride, size_t n, size_t d, int bits, const float* table,
                       size_t table_size, float* out, size_t out_stride) {
  HWY_DYNAMIC_DISPATCH(DecodeIndexRowsImpl)(codes, stride, n, d, bits, table, table_size, out, out_stride);
}
void signs_to_floats(const uint8_t* packed, size_t count, float plus, float* out) {
  HWY_DYNAMIC_DISPATCH(SignsToFloatsImpl)(packed, count, plus, out);
}
void int8_to_floats(const uint8_t* codes, size_t count, float* out) {
  HWY_DYNAMIC_DISPATCH(Int8ToFloatsImpl)(codes, count, out);
}

}  // namespace kvsketch::simd
#endif
