// Highway implementations of int_index_kernels.hpp. Rows are unpacked a block at a time into
// index bytes (in registers, or L1-resident), looked up in the byte table with byte shuffles and
// multiplied in integers: with AVX-512 VNNI and VBMI (target AVX3_DL) by vpdpbusd (or AMX tiles);
// on AVX2 and AVX3 by vpdpbusd where the CPU has VNNI, else pmaddubsw and pmaddwd
// (int_index_avx2-inl.h); elsewhere by pmaddubsw and pmaddwd (int_index_shuffle-inl.h). Every target
// computes the same integer sums, hence the same floats as reference::.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/simd/int_index_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/aligned_allocator.h>
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "kvsketch/bitpack.hpp"
#include "simd/amx.hpp"
#include "simd/exp_non_positive-inl.h"
#include "simd/fetch.hpp"
#include "simd/int_index_kernels.hpp"

HWY_BEFORE_NAMESPACE();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET == HWY_AVX3_DL
// Highway 1.0's target string for AVX3_DL names "avxvnni" (the VEX form) where the EVEX form is
// meant; the runtime check of the target includes AVX512-VNNI. AMX is enabled for the tile
// kernels of int_index_amx-inl.h, which run only where amx_usable() says so.
#pragma GCC target("avx512vnni,amx-tile,amx-int8")
#endif

#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128
void IntScoresImpl(const RowSource& rows, size_t n, const float* queries, size_t heads, float scale, float* out,
                   size_t out_stride, const RowFactor* factors) {
  reference::int_index_scores(rows, n, queries, heads, scale, out, out_stride, factors);
}
void IntWeightedSumImpl(const RowSource& rows, size_t n, const float* weights, size_t heads, size_t weight_stride,
                        float* acc, size_t acc_stride, const RowFactor* factors) {
  reference::int_index_weighted_sum(rows, n, weights, heads, weight_stride, acc, acc_stride, factors);
}
bool IntAttentionImpl(const AttentionKeys&, const AttentionPart*, size_t, size_t, size_t, float*, float*) {
  return false;  // the caller runs the separate kernels
}
#else

using DU8 = hn::ScalableTag<uint8_t>;
using DI8 = hn::ScalableTag<int8_t>;
using DI16 = hn::ScalableTag<int16_t>;
using DI32 = hn::ScalableTag<int32_t>;
using DI64 = hn::ScalableTag<int64_t>;
using DF = hn::ScalableTag<float>;
using VU8 = hn::Vec<DU8>;
using VI8 = hn::Vec<DI8>;
using VI16 = hn::Vec<DI16>;
using VI32 = hn::Vec<DI32>;

// Unpacks a row of b-bit indices (b <= 4) L = Lanes(DC) <= 32 at a time, the L * b / 8 <= 16
// input bytes loaded once into every 128-bit block: each index's 16-bit lane gathers the one or
// two bytes holding its bits (a byte shuffle), the high half of a multiply by 2^(16 - s) shifts them
// down from their offset s (an index that starts a byte goes to the lane's high byte, s = 8, as
// 2^16 is past 16 bits), a mask keeps its b bits and packuswb makes bytes. 7 instructions per 32
// indices where the scalar loop takes one per bit; 2 of them multiplies, against the 4 multiplies
// and shifts of a multiply by 2^(16 - s - b) and a shift right by 16 - b (on Intel both share the
// ports of the multiply-adds that follow: docs/history/decode-speed.md). 1-bit indices (QJL's signs) take 4: a
// shuffle spreads each byte over its 8 indices' lanes and a bit test picks each lane's bit.
class ShuffleUnpacker {
 public:
  using DC = hn::CappedTag<uint8_t, 32>;
  using D16 = hn::Repartition<uint16_t, DC>;

  // wanted = false: never used (the caller unpacks in registers), so nothing is built.
  ShuffleUnpacker(const RowSource& rows, size_t padded, bool wanted = true) : bits_(rows.bits) {
    const size_t lanes = hn::Lanes(DC()), row_bytes = packed_bytes(rows.dim, rows.bits);
    usable_ = wanted && rows.bits >= 1 && rows.bits <= 4 && padded % lanes == 0;
    if (!usable_) return;
    // Rows of fewer than 16 bytes (the outlier split's 32 channels at 3 bits, its 1-bit signs) are
    // read by ShortRow: a 16-byte load would read past the row.
    short_bytes_ = row_bytes < 16 ? row_bytes : 0;
    chunks_ = padded / lanes;
    shuffles_.assign(chunks_ * 2 * lanes, 0x80);
    load_at_.resize(chunks_);
    multipliers_.resize(lanes);
    bit_masks_.resize(lanes);
    const size_t b = static_cast<size_t>(rows.bits);
    for (size_t i = 0; i < lanes; ++i) bit_masks_[i] = static_cast<uint8_t>(1u << (i % 8));
    // packuswb fills each 128-bit block with 8 words of the first vector, then 8 of the second:
    // index i of a chunk lives in vector (i % 16) / 8, word 8 * (i / 16) + i % 8.
    const auto vector_of = [](size_t i) { return (i % 16) / 8; };
    const auto word_of = [](size_t i) { return 8 * (i / 16) + i % 8; };
    const auto offset_of = [&](size_t i) { return (b * i) % 8 == 0 ? 8 : (b * i) % 8; };  // within its lane
    for (size_t i = 0; i < lanes; ++i)
      multipliers_[vector_of(i) * lanes / 2 + word_of(i)] = static_cast<uint16_t>(1u << (16 - offset_of(i)));
    for (size_t k = 0; k < chunks_; ++k) {
      // The 16 bytes loaded end inside the row: the last chunks load from row_bytes - 16.
      const size_t start = k * lanes * b / 8;
      load_at_[k] = short_bytes_ ? 0 : std::min(start, row_bytes - 16);
      const size_t shift = start - load_at_[k];
      for (size_t i = 0; i < lanes && k * lanes + i < rows.dim; ++i) {
        const size_t bit = b * i, byte = shift + bit / 8;
        if (b == 1) {  // lane i takes the byte of index i
          shuffles_[k * 2 * lanes + i] = static_cast<uint8_t>(byte);
          continue;
        }
        uint8_t* lane = shuffles_.data() + k * 2 * lanes + vector_of(i) * lanes + 2 * word_of(i);
        if (offset_of(i) == 8) {
          lane[1] = static_cast<uint8_t>(byte);
        } else {
          lane[0] = static_cast<uint8_t>(byte);
          if (bit % 8 + b > 8) lane[1] = static_cast<uint8_t>(byte + 1);
        }
      }
    }
  }

  bool usable() const { return usable_; }

  // Whether rows have 2 to 4 bits and at least 16 bytes (every usual head dim), so that
  // Chunk<true> may unpack them without testing their form.
  bool full_rows() const { return bits_ >= 2 && short_bytes_ == 0; }

  // The constants of the chunks, to be held in a caller's locals: the callers' byte stores may
  // alias the members, which the compiler would otherwise load again after each of them.
  struct Constants {
    const uint8_t* shuffles;  // per chunk: the byte pairs of the L indices' 16-bit lanes
    const uint32_t* load_at;  // per chunk: where its 16-byte load starts in the row
    hn::Vec<D16> first, second;  // the multipliers of the two halves: 2^(16 - s)
    hn::Vec<D16> mask;           // 2^b - 1
    hn::Vec<DC> bit_masks;       // 1-bit indices: lane i's bit within its byte
    size_t short_bytes;
    bool one_bit;
    hn::Vec<D16> first_high, second_high;  // Words<true>: 2^(8 - s)
    hn::Vec<D16> mask_high;                // (2^b - 1) * 256
  };
  HWY_INLINE Constants constants() const {
    const D16 d16;
    const auto first = hn::LoadU(d16, multipliers_.data()), second = hn::LoadU(d16, multipliers_.data() + hn::Lanes(d16));
    const auto mask = hn::Set(d16, static_cast<uint16_t>((1 << bits_) - 1));
    return {shuffles_.data(),
            load_at_.data(),
            first,
            second,
            mask,
            hn::LoadU(DC(), bit_masks_.data()),
            short_bytes_,
            bits_ == 1,
            hn::ShiftRight<8>(first),
            hn::ShiftRight<8>(second),
            hn::ShiftLeft<8>(mask)};
  }

  // Chunk k of a full row (full_rows()) before packuswb makes bytes of it: 16-bit words, index i of
  // the chunk in vector (i % 16) / 8 (first, second), word 8 * (i / 16) + i % 8, in the word's low
  // byte, or with kHigh in its high byte: a multiply by 2^(8 - s) shifts it up from its offset s
  // where the high half of one by 2^(16 - s) shifts it down. The words of two rows, one of each
  // form, or together into the rows' indices interleaved by bytes.
  template <bool kHigh>
  static HWY_INLINE void Words(const Constants& c, const uint8_t* packed, size_t k, hn::Vec<D16>& first,
                               hn::Vec<D16>& second) {
    const DC dc;
    const D16 d16;
    const auto source = hn::LoadDup128(dc, packed + c.load_at[k]);
    const uint8_t* shuffle = c.shuffles + k * 2 * hn::Lanes(dc);
    first = hn::BitCast(d16, hn::TableLookupBytesOr0(source, hn::LoadU(dc, shuffle)));
    second = hn::BitCast(d16, hn::TableLookupBytesOr0(source, hn::LoadU(dc, shuffle + hn::Lanes(dc))));
    if constexpr (kHigh) {
      first = hn::And(hn::Mul(first, c.first_high), c.mask_high);
      second = hn::And(hn::Mul(second, c.second_high), c.mask_high);
    } else {
      first = hn::And(hn::MulHigh(first, c.first), c.mask);
      second = hn::And(hn::MulHigh(second, c.second), c.mask);
    }
  }

  // Indices [k * L, (k + 1) * L) of the row at `packed` (zero past dim), as the class comment says.
  // kFull: the caller knows full_rows().
  template <bool kFull = false>
  static HWY_INLINE hn::Vec<DC> Chunk(const Constants& c, const uint8_t* packed, size_t k) {
    const DC dc;
    const D16 d16;
    const auto source = !kFull && HWY_UNLIKELY(c.short_bytes) ? ShortRow(packed, c.short_bytes)
                                                                : hn::LoadDup128(dc, packed + c.load_at[k]);
    const uint8_t* shuffle = c.shuffles + k * 2 * hn::Lanes(dc);
    if (!kFull && c.one_bit) {
      const auto bytes = hn::TableLookupBytesOr0(source, hn::LoadU(dc, shuffle));
      return hn::IfThenElseZero(hn::TestBit(bytes, c.bit_masks), hn::Set(dc, uint8_t{1}));
    }
    auto first = hn::BitCast(d16, hn::TableLookupBytesOr0(source, hn::LoadU(dc, shuffle)));
    auto second = hn::BitCast(d16, hn::TableLookupBytesOr0(source, hn::LoadU(dc, shuffle + hn::Lanes(dc))));
    first = hn::And(hn::MulHigh(first, c.first), c.mask);
    second = hn::And(hn::MulHigh(second, c.second), c.mask);
    return PackBlocks(first, second);
  }

  // Index bytes of the row at `packed`: L per chunk, up to the padded dim.
  void Row(const uint8_t* packed, uint8_t* out) const {
    ForRows(packed, 0, 1, [&](size_t, size_t k, hn::Vec<DC> v) HWY_ATTR { hn::StoreU(v, DC(), out + k * hn::Lanes(DC())); });
  }

  // emit(r, k, chunk k of row r) for rows [0, count) from `first`, row r at first + r * stride, chunk
  // by chunk.
  template <class Emit>
  HWY_INLINE void ForRows(const uint8_t* first, size_t stride, size_t count, const Emit& emit) const {
    const Constants c = constants();
    const size_t chunks = chunks_;
    for (size_t r = 0; r < count; ++r)
      for (size_t k = 0; k < chunks; ++k) emit(r, k, Chunk(c, first + r * stride, k));
  }

 private:
  // packuswb: per 128-bit block, the words (< 256) of a's block, then b's, as bytes.
  static HWY_INLINE hn::Vec<DC> PackBlocks(hn::Vec<D16> a, hn::Vec<D16> b) {
#if HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3
    return hn::Vec<DC>{_mm_packus_epi16(a.raw, b.raw)};
#else
    return hn::Vec<DC>{_mm256_packus_epi16(a.raw, b.raw)};
#endif
  }

  // A row of n < 16 bytes, zero after them, in every 128-bit block: two overlapping loads of 8 (or
  // 4) bytes, the second shifted past the overlap.
  static HWY_INLINE hn::Vec<DC> ShortRow(const uint8_t* packed, size_t n) {
    uint64_t low = 0, high = 0;
    if (n >= 8) {
      std::memcpy(&low, packed, 8);
      std::memcpy(&high, packed + n - 8, 8);
      high = n == 8 ? 0 : high >> (8 * (16 - n));
    } else if (n >= 4) {
      uint32_t first, last;
      std::memcpy(&first, packed, 4);
      std::memcpy(&last, packed + n - 4, 4);
      low = first | (n == 4 ? 0 : uint64_t{last >> (8 * (8 - n))} << 32);
    } else {
      for (size_t j = 0; j < n; ++j) low |= uint64_t{packed[j]} << (8 * j);
    }
    // Built in registers: through memory, the two 8-byte stores and the 16-byte load stall on
    // store forwarding.
    const __m128i block = _mm_set_epi64x(static_cast<long long>(high), static_cast<long long>(low));
#if HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3
    return hn::Vec<DC>{block};
#else
    return hn::Vec<DC>{_mm256_broadcastsi128_si256(block)};
#endif
  }

  int bits_;
  bool usable_ = false;
  size_t chunks_ = 0, short_bytes_ = 0;
  std::vector<uint8_t> shuffles_;
  std::vector<uint32_t> load_at_;
  std::vector<uint16_t> multipliers_;  // per 16-bit lane: 2^(16 - offset)
  std::vector<uint8_t> bit_masks_;
};

// Unpacks rows of b-bit indices into index bytes, zero past dim, in rows of `padded` bytes.
class Unpacker {
 public:
  Unpacker(const RowSource& rows, size_t padded)
      : rows_(rows), padded_(padded), shuffle_(rows, padded, !FieldsCover(padded)) {
#if HWY_TARGET == HWY_AVX3_DL
    // 64 indices take 8 * bits bytes: each qword gathers the `bits` bytes of its 8 indices
    // (vpermb), then vpmultishiftqb pulls every index's bits to the bottom of its byte.
    const int bits = rows.bits;
    const size_t row_bytes = packed_bytes(rows.dim, bits);
    HWY_ALIGN uint8_t gather[64], shifts[64];
    for (int g = 0; g < 8; ++g)
      for (int k = 0; k < 8; ++k) {
        gather[8 * g + k] = static_cast<uint8_t>(bits * g + k);
        shifts[8 * g + k] = static_cast<uint8_t>(bits * k);
      }
    gather_ = _mm512_load_si512(gather);
    shifts_ = _mm512_load_si512(shifts);
    chunks_ = padded / 64;
    // Per chunk: the bytes it may read (the row's end).
    for (size_t k = 0; k < chunks_ && k < kMaxChunks; ++k) {
      const size_t offset = k * 8 * static_cast<size_t>(bits);
      const size_t available = offset < row_bytes ? std::min<size_t>(row_bytes - offset, 8 * bits) : 0;
      load_[k] = (__mmask64{1} << available) - 1;
    }
#endif
  }

  // Rows [first, first + count), row r at out + r * padded. (Where fields_usable(), the kernels
  // unpack in registers and call neither this nor Grouped.)
  void Rows(size_t first, size_t count, uint8_t* out) const {
    if (shuffle_.usable()) {
      const size_t padded = padded_;
      shuffle_.ForRows(rows_.data + first * rows_.stride, rows_.stride, count,
                       [&](size_t r, size_t k, hn::Vec<ShuffleUnpacker::DC> v) HWY_ATTR {
                         hn::StoreU(v, ShuffleUnpacker::DC(), out + r * padded + k * hn::Lanes(ShuffleUnpacker::DC()));
                       });
      return;
    }
    for (size_t r = 0; r < count; ++r) Portable(first + r, out + r * padded_);
  }

  // Rows [first, first + count) in groups of R = GroupRowsPerVector() rows: the vector of group
  // g and 16-index block k holds block k of each of the group's rows, one per 128-bit block
  // (rows past count are zero). A dot product then sums each row within its own block.
  void Grouped(size_t first, size_t count, uint8_t* out) const {
    const size_t per_vector = GroupRowsPerVector(), blocks = padded_ / 16, vector_bytes = hn::Lanes(DU8());
    const size_t groups = (count + per_vector - 1) / per_vector;
    std::vector<uint8_t> natural(padded_);
    for (size_t g = 0; g < groups; ++g)
      for (size_t r = 0; r < per_vector; ++r) {
        if (g * per_vector + r < count) {
          Portable(first + g * per_vector + r, natural.data());
        } else {
          std::fill(natural.begin(), natural.end(), uint8_t{0});
        }
        for (size_t k = 0; k < blocks; ++k)
          std::memcpy(out + (g * blocks + k) * vector_bytes + 16 * r, natural.data() + 16 * k, 16);
      }
  }

  // The shuffle unpacker (where it is usable(), the AVX2 kernels unpack in registers through it).
  const ShuffleUnpacker& shuffle() const { return shuffle_; }

  // Rows per vector in the grouped layout: one row per 128-bit block.
  static size_t GroupRowsPerVector() { return hn::Lanes(DU8()) / 16; }

  // Whether the bit-field lookups serve these rows (AVX3_DL only, up to 1024 coordinates): the
  // kernels then unpack in registers instead of through Rows or Grouped.
  bool fields_usable() const { return FieldsCover(padded_); }

  // The same for rows of `padded` index bytes, before an Unpacker is built.
  static bool FieldsCover(size_t padded) {
#if HWY_TARGET == HWY_AVX3_DL
    return padded / 64 <= kMaxChunks;
#else
    (void)padded;
    return false;
#endif
  }

 private:
  void Portable(size_t row, uint8_t* out) const {
    if (shuffle_.usable()) return shuffle_.Row(rows_.data + row * rows_.stride, out);
    unpack_bits(rows_.data + row * rows_.stride, rows_.dim, rows_.bits, out);
    std::memset(out + rows_.dim, 0, padded_ - rows_.dim);
  }

  const RowSource& rows_;
  size_t padded_;
  ShuffleUnpacker shuffle_;
#if HWY_TARGET == HWY_AVX3_DL
  static constexpr size_t kMaxChunks = 16;  // dim <= 1024; wider rows take the portable path

 public:

  int bits() const { return rows_.bits; }

  // The bytes of chunk k within a row (a load mask of at most 32 bytes).
  __mmask64 chunk_mask(size_t k) const { return load_[k]; }
  size_t dim() const { return rows_.dim; }

  // Rows [0, count) from `first` (row r at first + r * stride), every chunk looked up in `table`:
  // row r's chunk k at out + r * out_stride + 64 k. Each row also asks for the row `ahead` rows
  // later (see FetchRows; rows past the end are only asked for, never read).
  void LookupRows(const uint8_t* first, size_t stride, size_t count, __m512i table, size_t ahead, uint8_t* out,
                  size_t out_stride) const {
    switch (chunks_) {  // unrolled chunks for the common head sizes, so that the constants stay in registers
      case 1: return LookupRowsOf<1>(first, stride, count, table, ahead, out, out_stride);
      case 2: return LookupRowsOf<2>(first, stride, count, table, ahead, out, out_stride);
      case 4: return LookupRowsOf<4>(first, stride, count, table, ahead, out, out_stride);
      default: return LookupRowsOf<0>(first, stride, count, table, ahead, out, out_stride);
    }
  }

 private:
  // kChunks chunks per row; 0: chunks_ of them, in a loop that is not unrolled.
  template <size_t kChunks>
  HWY_INLINE void LookupRowsOf(const uint8_t* first, size_t stride, size_t count, __m512i table, size_t ahead,
                               uint8_t* out, size_t out_stride) const {
    const size_t chunks = kChunks != 0 ? kChunks : chunks_;
    const __m512i gather = gather_, shifts = shifts_;
    __mmask64 load[kChunks != 0 ? kChunks : kMaxChunks];
    for (size_t k = 0; k < chunks; ++k) load[k] = load_[k];
    const size_t chunk_bytes = 8 * static_cast<size_t>(rows_.bits);
    for (size_t r = 0; r < count; ++r) {
      const uint8_t* row = first + r * stride;
      Ask(row + ahead * stride, stride);
      for (size_t k = 0; k < chunks; ++k)
        _mm512_storeu_si512(out + r * out_stride + 64 * k,
                            _mm512_permutexvar_epi8(FieldsWith(gather, shifts, load[k], row + k * chunk_bytes), table));
    }
  }

  // Chunk k of a row as raw bit fields, its constants passed in so that a loop can hold them in
  // registers: each byte's low b bits are its index, the bits above belong to the next indices (a
  // 64-entry vpermb table that repeats every 2^b entries ignores them), and bytes past dim are
  // arbitrary. Three instructions per 64 indices.
  static HWY_INLINE __m512i FieldsWith(__m512i gather, __m512i shifts, __mmask64 load, const uint8_t* chunk) {
    return _mm512_multishift_epi64_epi8(shifts, _mm512_permutexvar_epi8(gather, _mm512_maskz_loadu_epi8(load, chunk)));
  }

  // Prefetches the lines of a row of `stride` bytes (one line where rows are at most a line,
  // since every line then holds some row's start).
  static HWY_INLINE void Ask(const uint8_t* row, size_t stride) {
    for (size_t line = 0; line < stride; line += 64) hwy::Prefetch(row + line);
  }

  __m512i gather_, shifts_;
  __mmask64 load_[kMaxChunks] = {};
  size_t chunks_ = 0;
#endif
};

// acc += a[2e] * b[2e] + a[2e+1] * b[2e+1] in lane e.
HWY_INLINE VI32 DotWords(VI32 acc, VI16 a, VI16 b) {
#if HWY_TARGET == HWY_AVX3_DL
  return VI32{_mm512_dpwssd_epi32(acc.raw, a.raw, b.raw)};
#else
  VI32 unused = hn::Zero(DI32());
  return hn::ReorderWidenMulAccumulate(DI32(), a, b, acc, unused);
#endif
}

// The table's levels plus `offset` as bytes in every 128-bit block, for the shuffle lookups.
VU8 TableVector(const ByteTable& table, int offset) {
  HWY_ALIGN uint8_t bytes[16];
  for (int l = 0; l < 16; ++l) bytes[l] = static_cast<uint8_t>(table.levels[l] + offset);
  return hn::LoadDup128(DU8(), bytes);
}

#if HWY_TARGET == HWY_AVX3_DL
// The byte table plus `offset` repeated over vpermb's 64 entries: entry e holds level
// e mod 2^bits, so that the bit-field lookups need not mask the bits above the index.
__m512i FieldTable(const ByteTable& table, int bits, int offset) {
  HWY_ALIGN uint8_t bytes[64];
  for (int e = 0; e < 64; ++e) bytes[e] = static_cast<uint8_t>(table.levels[e & ((1 << bits) - 1)] + offset);
  return _mm512_load_si512(bytes);
}
#endif

// Asks for rows [first, first + count) (clipped to n) ahead of their use, a block (about 2 us)
// early: the blocks are contiguous, but each is a few KB and the hardware prefetcher restarts at
// every page, so without this the first touch of each block waits on memory. The kernels ask for
// a block in parts spread over the block before it, so that the requests do not all wait for
// the same few line-fill buffers at once. The same part kFarBlocks blocks further on is asked
// into L2 only (FetchLine), so that the near requests find it there (3-4% of the tq_mse:b=3 step
// on Zen 4; the near ones into L2 as well were 10% slower: these kernels read a block's lines
// too soon after asking for them to wait on L2).
constexpr size_t kFarBlocks = 2;

HWY_INLINE void FetchRows(const RowSource& rows, size_t first, size_t count, size_t n) {
  if (first >= n) return;
  count = std::min(count, n - first);
  const uint8_t* begin = rows.data + first * rows.stride;
  const uint8_t* end = rows.data + (first + count) * rows.stride;
  for (const uint8_t* at = begin; at < end; at += 64) hwy::Prefetch(at);
  const size_t far = first + kFarBlocks * kIntBlockRows;
  if (far >= n) return;
  const uint8_t* far_end = rows.data + std::min(n, far + count) * rows.stride;
  for (const uint8_t* at = rows.data + far * rows.stride; at < far_end; at += 64) FetchLine(at);
}

// Row factors of rows [first, first + count), count <= kIntBlockRows, into out (1 without).
void LoadFactors(const RowSource& rows, const RowFactor* factors, size_t first, size_t count, float* out) {
  if (factors == nullptr || !factors->half) {
    load_row_factors(rows, factors, first, count, out);
    return;
  }
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const uint8_t* at = rows.data + first * rows.stride + factors->offset;
#if HWY_TARGET <= HWY_AVX2
  // Eight rows' halves put together in a register by pinsrw, then converted at once. On Zen 4 the
  // 32-bit gathers this replaced (AVX-512) took 3-4% more of a decode step at 16k tokens (205-211
  // against 213-215 us, one thread, cache-resident, alternated); a copy through memory stalls on
  // store forwarding.
  const auto half = [&](size_t i) {
    uint16_t bits;
    std::memcpy(&bits, at + i * rows.stride, sizeof(bits));
    return static_cast<int>(bits);
  };
  size_t done = 0;
  for (; done + 8 <= count; done += 8) {
    __m128i eight = _mm_cvtsi32_si128(half(done));
    eight = _mm_insert_epi16(eight, half(done + 1), 1);
    eight = _mm_insert_epi16(eight, half(done + 2), 2);
    eight = _mm_insert_epi16(eight, half(done + 3), 3);
    eight = _mm_insert_epi16(eight, half(done + 4), 4);
    eight = _mm_insert_epi16(eight, half(done + 5), 5);
    eight = _mm_insert_epi16(eight, half(done + 6), 6);
    eight = _mm_insert_epi16(eight, half(done + 7), 7);
    _mm256_storeu_ps(out + done, _mm256_cvtph_ps(eight));
  }
  if (done == count) return;
  at += done * rows.stride;
  out += done;
  count -= done;
#endif
  HWY_ALIGN uint16_t halves[kIntBlockRows] = {};
  for (size_t i = 0; i < count; ++i) std::memcpy(halves + i, at + i * rows.stride, sizeof(uint16_t));
  HWY_ALIGN float converted[kIntBlockRows];
  for (size_t i = 0; i < kIntBlockRows; i += hn::Lanes(df))
    hn::Store(hn::PromoteTo(df, hn::Load(dh, reinterpret_cast<const hwy::float16_t*>(halves) + i)), df, converted + i);
  std::copy_n(converted, count, out);
}

// w * (kWeightLargest / largest) to the nearest integer, ties to even as nearbyint rounds. The
// products are within +-(kWeightLargest + 1), so the conversion needs none of NearestInt's fixes for
// values past int32's range (four more instructions a vector).
HWY_INLINE VI32 RoundSmall(hn::Vec<DF> v) {
#if HWY_TARGET <= HWY_AVX3
  return VI32{_mm512_cvtps_epi32(v.raw)};
#elif HWY_TARGET == HWY_AVX2
  return VI32{_mm256_cvtps_epi32(v.raw)};
#else
  return hn::NearestInt(v);
#endif
}

// The weights of one block of rows, per head, as integers within +-kWeightLargest against the
// block's largest magnitude (the rounding reference:: defines), and the scale back to floats.
struct BlockWeights {
  static constexpr size_t kLanes = hn::MaxLanes(DF()), kVectors = kIntBlockRows / kLanes;
  std::vector<int16_t> words;  // head h at h * kIntBlockRows; zero past the block's rows
  std::vector<float> scale;    // per head: largest / kWeightLargest * table scale
  std::vector<uint8_t> live;   // per head: whether any weight of the block is nonzero
  float table_scale;

  BlockWeights(size_t heads, float table_scale_)
      : words(heads * kIntBlockRows), scale(heads), live(heads), table_scale(table_scale_),
        products_(heads * kIntBlockRows), largest_(heads) {}

  // Weights [start, start + count) of each head times the rows' factors, rounded into `words`
  // (16-bit, as the word kernels and AMX take them).
  void Round(const float* weights, size_t heads, size_t stride, size_t start, size_t count, const float* row_factor) {
    const hn::Rebind<int16_t, DI32> dw;
    Round(weights, heads, stride, start, count, row_factor, [&](size_t h, const VI32* rounded) {
      for (size_t v = 0; v < kVectors; ++v) hn::StoreU(hn::DemoteTo(dw, rounded[v]), dw, words.data() + h * kIntBlockRows + v * kLanes);
    });
  }

  // The same, with emit(h, rounded) taking head h's kVectors vectors of integers instead (all
  // zero where the head's weights are).
  template <class Emit>
  void Round(const float* weights, size_t heads, size_t stride, size_t start, size_t count, const float* row_factor,
             const Emit& emit) {
    const DF df;
    // A short block (the last) goes through a zero-padded copy: not every target's masked load
    // stays within the array.
    HWY_ALIGN float padded[kIntBlockRows];
    const auto block_of = [&](const float* values) {
      if (count == kIntBlockRows) return values;
      std::fill(std::copy_n(values, count, padded), padded + kIntBlockRows, 0.0f);
      return static_cast<const float*>(padded);
    };
    hn::Vec<DF> factor[kVectors];
    const float* factors = block_of(row_factor);
    for (size_t v = 0; v < kVectors; ++v) factor[v] = hn::LoadU(df, factors + v * kLanes);
    // Every head's largest magnitude first, then the rounding: the heads' reductions and divisions
    // are chains of dependent instructions, and this way they overlap (on Zen 4 the per-head loop
    // spent about a fifth of the weighted sum in them).
    for (size_t h = 0; h < heads; ++h) {
      const float* head_weights = block_of(weights + h * stride + start);
      float* products = products_.data() + h * kIntBlockRows;
      auto top = hn::Zero(df);
      for (size_t v = 0; v < kVectors; ++v) {
        const auto product = hn::Mul(hn::LoadU(df, head_weights + v * kLanes), factor[v]);
        hn::StoreU(product, df, products + v * kLanes);
        top = hn::Max(top, hn::Abs(product));
      }
      largest_[h] = hn::GetLane(hn::MaxOfLanes(df, top));
    }
    for (size_t h = 0; h < heads; ++h) {
      const float largest = largest_[h];
      live[h] = largest != 0.0f;
      scale[h] = largest / kWeightLargest * table_scale;
      const auto to_words = hn::Set(df, live[h] ? kWeightLargest / largest : 0.0f);
      const float* products = products_.data() + h * kIntBlockRows;
      VI32 rounded[kVectors];
      for (size_t v = 0; v < kVectors; ++v) rounded[v] = RoundSmall(hn::Mul(hn::LoadU(df, products + v * kLanes), to_words));
      emit(h, rounded);
    }
  }

 private:
  std::vector<float> products_;  // the block's weights times the row factors, per head
  std::vector<float> largest_;
};

// The weighted-sum accumulators of the heads in a kernel's lane order: lane l of a head holds
// coordinate coordinate[l] (lanes past the last coordinate hold 0 and are dropped). The moves are
// exact, so that every addition the kernel makes in lanes is the reference's addition.
class LaneAccumulators {
 public:
  LaneAccumulators(const float* acc, size_t heads, size_t acc_stride, size_t d, std::vector<uint32_t> coordinate)
      : heads_(heads), stride_(acc_stride), d_(d), coordinate_(std::move(coordinate)),
        lanes_(heads * coordinate_.size(), 0.0f) {
    for (size_t h = 0; h < heads_; ++h)
      for (size_t l = 0; l < coordinate_.size(); ++l)
        if (coordinate_[l] < d_) lanes_[h * coordinate_.size() + l] = acc[h * stride_ + coordinate_[l]];
  }

  float* Head(size_t h) { return lanes_.data() + h * coordinate_.size(); }
  size_t HeadStride() const { return coordinate_.size(); }  // Head(h + 1) - Head(h)

  void WriteBack(float* acc) const {
    for (size_t h = 0; h < heads_; ++h)
      for (size_t l = 0; l < coordinate_.size(); ++l)
        if (coordinate_[l] < d_) acc[h * stride_ + coordinate_[l]] = lanes_[h * coordinate_.size() + l];
  }

 private:
  size_t heads_, stride_, d_;
  std::vector<uint32_t> coordinate_;
  std::vector<float> lanes_;
};

// One past the rows' last code byte: the bound of the kernels' plain loads. Not n strides from
// the first row, since the rows may be one part of longer rows (a channel split's).
const uint8_t* CodesEnd(const RowSource& rows, size_t n) {
  return rows.data + (n - 1) * rows.stride + packed_bytes(rows.dim, rows.bits);
}

size_t PaddedDim(size_t d) { return (d + hn::Lanes(DU8()) - 1) / hn::Lanes(DU8()) * hn::Lanes(DU8()); }

// The query heads as signed bytes for the scores kernels: per head its bytes (head_bytes, padded
// with zeros), grouped by four heads with each 16-byte block repeated in every 128-bit block
// (bytes; missing heads of the last group are zero), the factor back to floats and the offset's
// share of the sums: (level + offset) * q sums to the wanted sum plus offset * sum q.
struct ScoreQueries {
  std::vector<int8_t> bytes, head_bytes;
  std::vector<float> factors;
  std::vector<int32_t> offsets;

  // The factors are the bytes' scale times the table's, times the logits' (the reference's order).
  ScoreQueries(const float* queries, size_t heads, size_t d, size_t padded, float table_scale, float scale) {
    const size_t lanes = hn::Lanes(DU8()), blocks = padded / 16, per_vector = Unpacker::GroupRowsPerVector();
    const size_t head_groups = (heads + 3) / 4;
    bytes.assign(head_groups * 4 * blocks * lanes, 0);
    head_bytes.assign(heads * padded, 0);
    factors.assign(head_groups * 4, 0.0f);
    offsets.assign(head_groups * 4, 0);
    for (size_t h = 0; h < heads; ++h) {
      int8_t* row = head_bytes.data() + h * padded;
      factors[h] = round_to_bytes(queries + h * d, d, row) * table_scale * scale;
      for (size_t j = 0; j < d; ++j) offsets[h] += kScoreTableOffset * row[j];
      for (size_t k = 0; k < blocks; ++k)
        for (size_t r = 0; r < per_vector; ++r)
          std::memcpy(bytes.data() + (h * blocks + k) * lanes + 16 * r, row + 16 * k, 16);
    }
  }
};

#include "simd/int_index_shuffle-inl.h"
#if HWY_TARGET == HWY_AVX3_DL
#include "simd/int_index_quads-inl.h"
#include "simd/int_index_amx-inl.h"
#endif
#include "simd/int_index_attention-inl.h"

void IntScoresImpl(const RowSource& rows, size_t n, const float* queries, size_t heads, float scale, float* out,
                   size_t out_stride, const RowFactor* factors) {
  const size_t padded = PaddedDim(rows.dim);
  const Unpacker unpacker(rows, padded);
  const ByteTable table = byte_table(rows.table, rows.bits, kScoreTableLargest);
  const ScoreQueries q(queries, heads, rows.dim, padded, table.scale, scale);
#if HWY_TARGET == HWY_AVX3_DL
  if (unpacker.fields_usable()) {
    const __m512i field_table = FieldTable(table, rows.bits, kScoreTableOffset);
    if (heads <= kTileRows && amx_usable())
      return AmxScores(rows, n, unpacker, field_table, q.head_bytes.data(), heads, padded, q.factors.data(),
                       q.offsets.data(), factors, out, out_stride);
    const QuadScorer scorer(rows, n, unpacker, field_table, q, heads, factors);
    for (size_t start = 0; start < n; start += kIntBlockRows) scorer.Block(start, out + start, out_stride);
    return;
  }
#endif
  const ShuffleScorer scorer(rows, n, unpacker, table, q, heads, factors);
  for (size_t start = 0; start < n; start += kIntBlockRows) scorer.Block(start, out + start, out_stride);
}

void IntWeightedSumImpl(const RowSource& rows, size_t n, const float* weights, size_t heads, size_t weight_stride,
                        float* acc, size_t acc_stride, const RowFactor* factors) {
  const size_t padded = PaddedDim(rows.dim);
  const ByteTable table = byte_table(rows.table, rows.bits);
  const Unpacker unpacker(rows, padded);
  BlockWeights block(heads, table.scale);
#if HWY_TARGET == HWY_AVX3_DL
  const bool fused = unpacker.fields_usable();
  const __m512i field_table = FieldTable(table, rows.bits, 0);
  if (fused && heads <= kAmxWeightedHeads && amx_usable())
    return AmxWeightedSum(rows, n, unpacker, field_table, weights, heads, weight_stride, padded, acc, acc_stride,
                          factors, block);
  if (fused)
    return QuadWeightedSum(rows, n, unpacker, field_table, weights, heads, weight_stride, padded, acc, acc_stride,
                           factors, block);
#endif
  LaneAccumulators lanes(acc, heads, acc_stride, rows.dim, ShuffleLaneCoordinates(padded));
  ShuffleAccumulator accumulator(rows, n, unpacker, table, heads, factors, block);
  for (size_t start = 0; start < n; start += kIntBlockRows)
    accumulator.Block(weights + start, weight_stride, start, lanes);
  lanes.WriteBack(acc);
}

bool IntAttentionImpl(const AttentionKeys& keys, const AttentionPart* values, size_t value_parts, size_t n,
                      size_t heads, float* max, float* sum) {
  return BlockAttention(keys, values, value_parts, n, heads, max, sum);
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace kvsketch::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvsketch::simd {

namespace {
std::atomic<bool> shuffle_vnni{true};
}  // namespace

bool shuffle_vnni_allowed() {
  static const bool environment_allows = std::getenv("KVSKETCH_VNNI") == nullptr ||
                                         std::strcmp(std::getenv("KVSKETCH_VNNI"), "0") != 0;
  return environment_allows && shuffle_vnni.load(std::memory_order_relaxed);
}
bool set_shuffle_vnni_allowed(bool allowed) { return shuffle_vnni.exchange(allowed); }

HWY_EXPORT(IntScoresImpl);
HWY_EXPORT(IntWeightedSumImpl);
HWY_EXPORT(IntAttentionImpl);

bool int_index_attention(const AttentionKeys& keys, const AttentionPart* values, size_t value_parts, size_t n,
                         size_t heads, float* max, float* sum) {
  if (n == 0 || heads == 0 || !int_index_attention_usable(keys, values, value_parts)) return false;
  return HWY_DYNAMIC_DISPATCH(IntAttentionImpl)(keys, values, value_parts, n, heads, max, sum);
}

void int_index_scores(const RowSource& rows, size_t n, const float* queries, size_t heads, float scale, float* out,
                      size_t out_stride, const RowFactor* factors) {
  if (n == 0 || heads == 0) return;
  HWY_DYNAMIC_DISPATCH(IntScoresImpl)(rows, n, queries, heads, scale, out, out_stride, factors);
}

void int_index_weighted_sum(const RowSource& rows, size_t n, const float* weights, size_t heads,
                            size_t weight_stride, float* acc, size_t acc_stride, const RowFactor* factors) {
  if (n == 0 || heads == 0) return;
  HWY_DYNAMIC_DISPATCH(IntWeightedSumImpl)(rows, n, weights, heads, weight_stride, acc, acc_stride, factors);
}

}  // namespace kvsketch::simd
#endif
