// The unpackers of the integer-index kernels (a Highway -inl module, once per x86 SIMD target):
// ShuffleUnpacker turns rows of b-bit indices into index
// bytes with byte shuffles and multiplies (every target but AVX3_DL, and AVX3_DL's rows past its
// bit-field lookups); Unpacker chooses between it, AVX3_DL's bit-field lookups and the portable
// loop, and lays rows out for the kernels.
#if defined(KVSKETCH_SIMD_INT_INDEX_UNPACK_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVSKETCH_SIMD_INT_INDEX_UNPACK_INL_H_
#undef KVSKETCH_SIMD_INT_INDEX_UNPACK_INL_H_
#else
#define KVSKETCH_SIMD_INT_INDEX_UNPACK_INL_H_
#endif

#include <algorithm>
#include <cstring>

#include <hwy/cache_control.h>

#include "core/kernel_memory.hpp"
#include "kvsketch/bitpack.hpp"
#include "simd/int_index_kernels.hpp"
#include "simd/int_index_target-inl.h"

KVSKETCH_INT_INDEX_BEGIN();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {

#if KVSKETCH_INT_INDEX_X86

// Unpacks a row of b-bit indices (b <= 4) L = Lanes(DC) <= 32 at a time, the L * b / 8 <= 16
// input bytes loaded once into every 128-bit block: each index's 16-bit lane gathers the one or
// two bytes holding its bits (a byte shuffle), the high half of a multiply by 2^(16 - s) shifts them
// down from their offset s (an index that starts a byte goes to the lane's high byte, s = 8, as
// 2^16 is past 16 bits), a mask keeps its b bits and packuswb makes bytes. 7 instructions per 32
// indices where the scalar loop takes one per bit; 2 of them multiplies, against the 4 multiplies
// and shifts of a multiply by 2^(16 - s - b) and a shift right by 16 - b (on Intel both share the
// ports of the multiply-adds that follow). 1-bit indices (QJL's signs) take 4: a
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
    const auto first = hn::LoadU(d16, multipliers_.data());
    const auto second = hn::LoadU(d16, multipliers_.data() + hn::Lanes(d16));
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
    SourceWords<kHigh>(c, hn::LoadDup128(DC(), packed + c.load_at[k]), k, first, second);
  }

  // Indices [k * L, (k + 1) * L) of the row at `packed` (zero past dim), as the class comment says.
  // kFull: the caller knows full_rows().
  template <bool kFull = false>
  static HWY_INLINE hn::Vec<DC> Chunk(const Constants& c, const uint8_t* packed, size_t k) {
    const DC dc;
    const auto source = !kFull && HWY_UNLIKELY(c.short_bytes) ? ShortRow(packed, c.short_bytes)
                                                                : hn::LoadDup128(dc, packed + c.load_at[k]);
    const uint8_t* shuffle = c.shuffles + k * 2 * hn::Lanes(dc);
    if (!kFull && c.one_bit) {
      const auto bytes = hn::TableLookupBytesOr0(source, hn::LoadU(dc, shuffle));
      return hn::IfThenElseZero(hn::TestBit(bytes, c.bit_masks), hn::Set(dc, uint8_t{1}));
    }
    hn::Vec<D16> first, second;
    SourceWords<false>(c, source, k, first, second);
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
  // Words of chunk k from its 16 source bytes (in every 128-bit block): each index's 16-bit lane
  // gathers its bytes, a multiply shifts it to the low (or with kHigh the high) byte, a mask keeps it.
  template <bool kHigh>
  static HWY_INLINE void SourceWords(const Constants& c, hn::Vec<DC> source, size_t k, hn::Vec<D16>& first,
                                     hn::Vec<D16>& second) {
    const DC dc;
    const D16 d16;
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
  KernelVector<uint8_t> shuffles_;
  KernelVector<uint32_t> load_at_;
  KernelVector<uint16_t> multipliers_;  // per 16-bit lane: 2^(16 - offset)
  KernelVector<uint8_t> bit_masks_;
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
    KernelVector<uint8_t> natural(padded_);
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

#endif  // KVSKETCH_INT_INDEX_X86

}  // namespace HWY_NAMESPACE
}  // namespace kvsketch::simd
KVSKETCH_INT_INDEX_END();

#endif  // KVSKETCH_SIMD_INT_INDEX_UNPACK_INL_H_
