// The pieces every integer-index kernel builds on, per SIMD target (a Highway -inl header): the
// table vectors, row prefetches and factor loads, the block weights rounded to integers, the
// accumulators in lane order, the query bytes of the scores, and the gathers of head sums.
#if defined(KVSKETCH_SIMD_INT_INDEX_BLOCKS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVSKETCH_SIMD_INT_INDEX_BLOCKS_INL_H_
#undef KVSKETCH_SIMD_INT_INDEX_BLOCKS_INL_H_
#else
#define KVSKETCH_SIMD_INT_INDEX_BLOCKS_INL_H_
#endif

#include <algorithm>
#include <cstring>
#include <utility>

#include <hwy/cache_control.h>

#include "core/kernel_memory.hpp"
#include "simd/fetch.hpp"
#include "simd/half_floats-inl.h"
#include "simd/int_index_unpack-inl.h"

KVSKETCH_INT_INDEX_BEGIN();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {

#if KVSKETCH_INT_INDEX_X86

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

// Asks for rows [first, first + count) (clipped to n) ahead of their use, a block early: the blocks are contiguous, but each is a few KB and the hardware prefetcher restarts at
// every page, so without this the first touch of each block waits on memory. The kernels ask for
// a block in parts spread over the block before it, so that the requests do not all wait for
// the same few line-fill buffers at once. The same part kFarBlocks blocks further on is asked
// into L2 only (FetchLine), so that the near requests find it there (the near ones into L2 as well
// were slower: these kernels read a block's lines too soon after asking for them to wait on L2).
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
#if HWY_TARGET <= HWY_AVX3
  // Quads: each quad's four fp16 factors side by side, sixteen rows' in four 8-byte loads.
  if (rows.quads && factors != nullptr && factors->half && first % 4 == 0 && count % 16 == 0) {
    const size_t quad_stride = 4 * rows.stride;
    const uint8_t* at = rows.data + first * rows.stride + 4 * factors->offset;
    for (size_t i = 0; i < count; i += 16, at += 4 * quad_stride) {
      const auto four = [&](size_t q) {
        long long bits;
        std::memcpy(&bits, at + q * quad_stride, sizeof(bits));
        return bits;
      };
      _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_set_epi64x(four(3), four(2), four(1), four(0))));
    }
    return;
  }
#endif
  if (factors == nullptr || !factors->half || rows.quads) {
    load_row_factors(rows, factors, first, count, out);
    return;
  }
  const DF df;
  const uint8_t* at = rows.data + first * rows.stride + factors->offset;
#if HWY_TARGET <= HWY_AVX2
  // Eight rows' halves put together in a register by pinsrw, then converted at once: faster than
  // 32-bit gathers (AVX-512), and a copy through memory stalls on store forwarding.
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
    hn::Store(LoadHalves(df, halves + i), df, converted + i);
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
  KernelVector<int16_t> words;  // head h at h * kIntBlockRows; zero past the block's rows
  KernelVector<float> scale;    // per head: largest / kWeightLargest * table scale
  KernelVector<uint8_t> live;   // per head: whether any weight of the block is nonzero
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
    // are chains of dependent instructions, and this way they overlap (one head at a time, they
    // were about a fifth of the weighted sum).
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
  KernelVector<float> products_;  // the block's weights times the row factors, per head
  KernelVector<float> largest_;
};

// The weighted-sum accumulators of the heads in a kernel's lane order: lane l of a head holds
// coordinate coordinate[l] (lanes past the last coordinate hold 0 and are dropped). The moves are
// exact, so that every addition the kernel makes in lanes is the reference's addition.
class LaneAccumulators {
 public:
  LaneAccumulators(const float* acc, size_t heads, size_t acc_stride, size_t d, KernelVector<uint32_t> coordinate)
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
  KernelVector<uint32_t> coordinate_;
  KernelVector<float> lanes_;
};

// One past the last byte the kernels' plain loads may read: the last row's readable bytes
// (RowSource::readable, its stride where 0), which run past its codes into the rest of its row (a
// norm), as every other row's loads run into the next row. Loads bounded by the codes alone sent
// the last group of every range, and so of every page of a paged cache, to the slower partial
// path. Not n strides from the first row, since the rows may be one part of longer rows (a
// channel split's).
const uint8_t* CodesEnd(const RowSource& rows, size_t n) {
  const size_t readable = rows.readable != 0 ? rows.readable : rows.stride;
  if (rows.quads) return rows.data + (n - 4) * rows.stride + 4 * readable;
  return rows.data + (n - 1) * rows.stride + readable;
}

size_t PaddedDim(size_t d) { return (d + hn::Lanes(DU8()) - 1) / hn::Lanes(DU8()) * hn::Lanes(DU8()); }

// The query heads as signed bytes for the scores kernels: per head its bytes (head_bytes, padded
// with zeros), grouped by four heads with each 16-byte block repeated in every 128-bit block
// (bytes; missing heads of the last group are zero), the factor back to floats and the offset's
// share of the sums: (level + offset) * q sums to the wanted sum plus offset * sum q.
struct ScoreQueries {
  KernelVector<int8_t> bytes, head_bytes;
  KernelVector<float> factors;
  KernelVector<int32_t> offsets;

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

// Per 128-bit block b of the result: the sums of heads 0..3 for the row of block b. acc[h]
// holds head h's partial sums, one row per block; two interleave levels gather them. (Any vector
// size: AVX2's and AVX3's 256-bit kernels call it too.)
template <class D>
HWY_INLINE hn::Vec<D> BlockHeadSums(D di, const hn::Vec<D>* acc) {
  const hn::Repartition<int64_t, D> d64;
  const auto t01 = hn::Add(hn::InterleaveLower(di, acc[0], acc[1]), hn::InterleaveUpper(di, acc[0], acc[1]));
  const auto t23 = hn::Add(hn::InterleaveLower(di, acc[2], acc[3]), hn::InterleaveUpper(di, acc[2], acc[3]));
  const auto a = hn::BitCast(d64, t01), b = hn::BitCast(d64, t23);
  return hn::Add(hn::BitCast(di, hn::InterleaveLower(d64, a, b)), hn::BitCast(di, hn::InterleaveUpper(d64, a, b)));
}

// out[h * stride + r] = scores[4 r + h] * factor[r] for r < rows, h < heads: four rows at a time
// through a 4 x 4 transpose where all four heads are wanted (the same products either way).
HWY_INLINE void StoreHeadMajor(const float* scores, const float* factor, size_t rows, size_t heads, float* out,
                               size_t stride) {
  const hn::FixedTag<float, 4> d4;
  size_t r = 0;
  if (heads == 4)
    for (; r + 4 <= rows; r += 4) {
      const auto r0 = hn::LoadU(d4, scores + 4 * r), r1 = hn::LoadU(d4, scores + 4 * r + 4);
      const auto r2 = hn::LoadU(d4, scores + 4 * r + 8), r3 = hn::LoadU(d4, scores + 4 * r + 12);
      const auto low01 = hn::InterleaveLower(d4, r0, r1), high01 = hn::InterleaveUpper(d4, r0, r1);
      const auto low23 = hn::InterleaveLower(d4, r2, r3), high23 = hn::InterleaveUpper(d4, r2, r3);
      const auto f = hn::LoadU(d4, factor + r);
      hn::StoreU(hn::Mul(hn::ConcatLowerLower(d4, low23, low01), f), d4, out + r);
      hn::StoreU(hn::Mul(hn::ConcatUpperUpper(d4, low23, low01), f), d4, out + stride + r);
      hn::StoreU(hn::Mul(hn::ConcatLowerLower(d4, high23, high01), f), d4, out + 2 * stride + r);
      hn::StoreU(hn::Mul(hn::ConcatUpperUpper(d4, high23, high01), f), d4, out + 3 * stride + r);
    }
  for (; r < rows; ++r)
    for (size_t h = 0; h < heads; ++h) out[h * stride + r] = scores[4 * r + h] * factor[r];
}

#endif  // KVSKETCH_INT_INDEX_X86

}  // namespace HWY_NAMESPACE
}  // namespace kvsketch::simd
KVSKETCH_INT_INDEX_END();

#endif  // KVSKETCH_SIMD_INT_INDEX_BLOCKS_INL_H_
