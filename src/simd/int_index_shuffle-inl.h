// The kernels of the targets without the bit-field lookups (AVX2, SSE4, AVX3 without VBMI, and
// AVX3_DL for rows past 1024 coordinates), a block of rows at a time (a Highway -inl module): the rows unpacked into index bytes by byte shuffles (ShuffleUnpacker),
// looked up in the byte table by byte shuffles (16 entries per 128-bit block) and multiplied in
// integers. GroupedScorer and PairAccumulator go through a block of unpacked rows in L1 (SSE4, and
// AVX3_DL's wide rows); AVX2 and AVX3 have their own 256-bit kernels instead (int_index_avx2-inl.h),
// and compile neither.
// ShuffleScorer and ShuffleAccumulator, the target's pair, serve the separate kernels and the fused
// one (int_index_attention-inl.h) alike.
#if defined(KVSKETCH_SIMD_INT_INDEX_SHUFFLE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVSKETCH_SIMD_INT_INDEX_SHUFFLE_INL_H_
#undef KVSKETCH_SIMD_INT_INDEX_SHUFFLE_INL_H_
#else
#define KVSKETCH_SIMD_INT_INDEX_SHUFFLE_INL_H_
#endif

#include "simd/int_index_avx2-inl.h"
#include "simd/int_index_blocks-inl.h"

KVSKETCH_INT_INDEX_BEGIN();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {

#if KVSKETCH_INT_INDEX_X86

#if HWY_TARGET != HWY_AVX2 && HWY_TARGET != HWY_AVX3  // AVX2 and AVX3 have their own kernels

// acc lane e += the four products u[4e + t] * s[4e + t], u unsigned below 128 (the scores' table
// plus its offset) and s signed: vpdpbusd with VNNI; elsewhere pmaddubsw, whose pairs of products
// (at most 2 * 127 * 128 in magnitude) do not saturate int16, then pmaddwd by ones.
HWY_INLINE VI32 DotBytes(VI32 acc, VU8 u, VI8 s) {
#if HWY_TARGET == HWY_AVX3_DL
  return VI32{_mm512_dpbusd_epi32(acc.raw, u.raw, s.raw)};
#else
  return hn::Add(acc, VI32{_mm_madd_epi16(_mm_maddubs_epi16(u.raw, s.raw), _mm_set1_epi16(1))});
#endif
}

// kGroups groups of rows against four heads (missing heads have zero queries): sums of group g
// at sums + g * Lanes(i32), as BlockHeadSums lays them out. acc[g][h] lane e sums the products
// of the value bytes 4e..4e+3 (unsigned) with the query's (signed).
template <int kGroups>
HWY_INLINE void ScoreGroups(const uint8_t* grouped, size_t blocks, VU8 table, const int8_t* queries, int32_t* sums) {
  const DU8 du8;
  const DI32 di32;
  const size_t lanes = hn::Lanes(du8);
  VI32 acc[kGroups][4];
  for (int g = 0; g < kGroups; ++g)
    for (int h = 0; h < 4; ++h) acc[g][h] = hn::Zero(di32);
  for (size_t k = 0; k < blocks; ++k) {
    VU8 values[kGroups];
    for (int g = 0; g < kGroups; ++g)
      values[g] = hn::TableLookupBytes(table, hn::LoadU(du8, grouped + (g * blocks + k) * lanes));
    for (int h = 0; h < 4; ++h) {
      const VI8 q = hn::LoadU(DI8(), queries + (h * blocks + k) * lanes);
      for (int g = 0; g < kGroups; ++g) acc[g][h] = DotBytes(acc[g][h], values[g], q);
    }
  }
  for (int g = 0; g < kGroups; ++g) hn::StoreU(BlockHeadSums(di32, acc[g]), di32, sums + g * hn::Lanes(di32));
}
#endif

#if HWY_TARGET != HWY_AVX2 && HWY_TARGET != HWY_AVX3
// The scores of blocks of rows: per block the rows unpacked in the grouped layout, then each group
// of four heads over the block's groups of rows, as (sum - offset) * head factor * row factor, the
// reference's operations in its order.
class GroupedScorer {
 public:
  GroupedScorer(const RowSource& rows, size_t n, const Unpacker& unpacker, const ByteTable& table,
                const ScoreQueries& queries, size_t heads, const RowFactor* factors)
      : rows_(rows), n_(n), unpacker_(unpacker), queries_(queries), heads_(heads), factors_(factors),
        grouped_(kIntBlockRows * PaddedDim(rows.dim)) {
    hn::Store(TableVector(table, kScoreTableOffset), DU8(), table_);
  }

  // The same rows' next segment (RowSegments): the RowSource this reads has moved to it.
  void NextSegment(size_t n) {
    n_ = n;
  }

  // Rows [start, start + min(kIntBlockRows, n - start)): head h's scores at out + h * out_stride.
  // (const: grouped_ is scratch, as a kernel's locals would be.)
  void Block(size_t start, float* out, size_t out_stride) const {
    const DI32 di32;
    const DF df;
    const size_t lanes = hn::Lanes(DU8()), blocks = PaddedDim(rows_.dim) / 16;
    const size_t per_vector = Unpacker::GroupRowsPerVector(), head_groups = (heads_ + 3) / 4;
    const VU8 table = hn::Load(DU8(), table_);
    // Groups of rows per pass: their 4 x kGroups accumulators, the values and the constants stay in
    // registers (32 with AVX-512, 16 below it).
    constexpr int kGroups = HWY_TARGET <= HWY_AVX3 ? 4 : 2;
    HWY_ALIGN int32_t sums[kGroups * HWY_MAX_BYTES / 4];
    HWY_ALIGN float scores[kGroups * HWY_MAX_BYTES / 4];
    const size_t count = std::min(kIntBlockRows, n_ - start);
    const size_t groups = (count + per_vector - 1) / per_vector;
    unpacker_.Grouped(start, count, grouped_.data());
    HWY_ALIGN float row_factor[kIntBlockRows];
    LoadFactors(rows_, factors_, start, count, row_factor);
    for (size_t hg = 0; hg < head_groups; ++hg) {
      const size_t group_heads = std::min<size_t>(4, heads_ - 4 * hg);
      const auto factor_v = hn::LoadDup128(df, queries_.factors.data() + 4 * hg);
      const auto offset_v = hn::LoadDup128(di32, queries_.offsets.data() + 4 * hg);
      const int8_t* head_group_bytes = queries_.bytes.data() + 4 * hg * blocks * lanes;
      for (size_t g = 0; g < groups; g += kGroups) {
        const size_t live_groups = std::min<size_t>(kGroups, groups - g);
        if (hg == 0) FetchRows(rows_, start + kIntBlockRows + g * per_vector, kGroups * per_vector, n_);
        const uint8_t* first = grouped_.data() + g * blocks * lanes;
        if (live_groups == kGroups) {
          ScoreGroups<kGroups>(first, blocks, table, head_group_bytes, sums);
        } else {
          for (size_t k = 0; k < live_groups; ++k)
            ScoreGroups<1>(first + k * blocks * lanes, blocks, table, head_group_bytes, sums + k * hn::Lanes(di32));
        }
        for (size_t k = 0; k < live_groups; ++k) {
          const auto sum = hn::Sub(hn::LoadU(di32, sums + k * hn::Lanes(di32)), offset_v);
          hn::StoreU(hn::Mul(hn::ConvertTo(df, sum), factor_v), df, scores + k * hn::Lanes(di32));
        }
        // scores[4 * row + h] for the rows of these groups, in order.
        const size_t first_row = g * per_vector, live_rows = std::min(count - first_row, live_groups * per_vector);
        StoreHeadMajor(scores, row_factor + first_row, live_rows, group_heads,
                       out + 4 * hg * out_stride + first_row, out_stride);
      }
    }
  }

 private:
  const RowSource& rows_;
  size_t n_;
  const Unpacker& unpacker_;
  const ScoreQueries& queries_;
  size_t heads_;
  const RowFactor* factors_;
  HWY_ALIGN uint8_t table_[HWY_MAX_BYTES];  // the table plus its offset in every 128-bit block
  mutable KernelVector<uint8_t> grouped_;
};

// The weighted sum takes a chunk of coordinates (a whole vector) of a row pair at a time and keeps,
// for four heads, kParts accumulators each.
using DChunk = DI8;
constexpr int kParts = 4;
using VChunk = hn::Vec<DChunk>;

// The signed bytes of two rows as kParts word vectors of pairs (a[j], b[j]), for DotWords
// against a pair of weights. The byte interleave and the widening permute coordinates within the
// chunk.
HWY_INLINE void WidenPairs(VChunk a, VChunk b, VI16* parts) {
  const DChunk dc;
  const DI16 di16;
  const VChunk low = hn::InterleaveLower(dc, a, b), high = hn::InterleaveUpper(dc, a, b);
  const hn::Half<DI8> dhi;
  parts[0] = hn::PromoteTo(di16, hn::LowerHalf(dhi, low));
  parts[1] = hn::PromoteTo(di16, hn::UpperHalf(dhi, low));
  parts[2] = hn::PromoteTo(di16, hn::LowerHalf(dhi, high));
  parts[3] = hn::PromoteTo(di16, hn::UpperHalf(dhi, high));
}

// Where the weighted-sum kernel's int32 lanes land within a chunk of Lanes(DChunk) coordinates:
// found by running WidenPairs on the coordinates themselves.
KernelVector<uint32_t> ChunkLaneOrder() {
  const DChunk dc;
  const DI16 di16;
  const size_t lanes = hn::Lanes(dc);
  HWY_ALIGN int8_t iota[HWY_MAX_BYTES];
  for (size_t m = 0; m < lanes; ++m) iota[m] = static_cast<int8_t>(m);
  const VChunk v = hn::Load(dc, iota);
  VI16 parts[kParts];
  WidenPairs(v, v, parts);
  KernelVector<uint32_t> order;
  HWY_ALIGN int16_t words[HWY_MAX_BYTES / 2];
  for (const VI16& part : parts) {
    hn::Store(part, di16, words);
    for (size_t e = 0; e < hn::Lanes(di16) / 2; ++e) order.push_back(static_cast<uint32_t>(words[2 * e] & 0xFF));
  }
  return order;
}

// One chunk of Lanes(DChunk) coordinates of a block for up to four heads: byte pairs of rows
// (i, i+1) widened to words, times the pair's two weights, summed in int32 lanes.
template <int kHeads>
HWY_INLINE void AccumulateChunk(const uint8_t* index, size_t padded, size_t c, size_t count, VChunk table,
                                const int16_t* words, VI32 (*sums)[kParts]) {
  const DChunk dc;
  const hn::Rebind<uint8_t, DChunk> du8;
  const DI16 di16;
  const DI32 di32;
  for (int h = 0; h < kHeads; ++h)
    for (int k = 0; k < kParts; ++k) sums[h][k] = hn::Zero(di32);
  for (size_t i = 0; i < count; i += 2) {
    const VChunk a = hn::TableLookupBytes(table, hn::BitCast(dc, hn::LoadU(du8, index + i * padded + c)));
    const VChunk b = hn::TableLookupBytes(table, hn::BitCast(dc, hn::LoadU(du8, index + (i + 1) * padded + c)));
    VI16 parts[kParts];
    WidenPairs(a, b, parts);
    for (int h = 0; h < kHeads; ++h) {
      int32_t pair;  // words i and i + 1, the first in the low half
      std::memcpy(&pair, words + h * kIntBlockRows + i, sizeof(pair));
      const VI16 w = hn::BitCast(di16, hn::Set(di32, pair));
      for (int k = 0; k < kParts; ++k) sums[h][k] = DotWords(sums[h][k], parts[k], w);
    }
  }
}

// Where PairAccumulator's lanes go: lane l of a head holds coordinate coordinate[l] (lanes past dim
// are dropped).
KernelVector<uint32_t> PairLaneCoordinates(size_t padded) {
  const size_t chunk = hn::Lanes(DChunk());
  const KernelVector<uint32_t> order = ChunkLaneOrder();
  KernelVector<uint32_t> coordinate(padded);
  for (size_t lane = 0; lane < padded; ++lane)
    coordinate[lane] = static_cast<uint32_t>(lane / chunk * chunk + order[lane % chunk]);
  return coordinate;
}

// The weighted sums of blocks of rows into lane accumulators (PairLaneCoordinates' order): per
// block the weights rounded to words, the rows unpacked, then each chunk of coordinates over the
// block's row pairs for each group of four heads.
class PairAccumulator {
 public:
  PairAccumulator(const RowSource& rows, size_t n, const Unpacker& unpacker, const ByteTable& table, size_t heads,
                  const RowFactor* factors, BlockWeights& block)
      : rows_(rows), n_(n), heads_(heads), padded_(PaddedDim(rows.dim)), unpacker_(unpacker), factors_(factors),
        block_(block), index_((kIntBlockRows + 1) * padded_, 0) {
    // The table repeats in every 128-bit block, so any part of it serves a chunk.
    hn::Store(hn::BitCast(DI8(), TableVector(table, 0)), DI8(), table_);
  }

  // The same rows' next segment (RowSegments): the RowSource this reads has moved to it.
  void NextSegment(size_t n) {
    n_ = n;
  }

  // Rows [start, start + min(kIntBlockRows, n - start)) with weights weights[h * weight_stride + i]
  // for row start + i, added to head h's lanes at lanes.Head(h).
  void Block(const float* weights, size_t weight_stride, size_t start, LaneAccumulators& lanes) {
    const DChunk dc;
    const DI32 di32;
    const DF df;
    const size_t chunk = hn::Lanes(dc), quarter = hn::Lanes(di32), padded = padded_;
    const VChunk table = hn::Load(dc, table_);
    const size_t count = std::min(kIntBlockRows, n_ - start);
    HWY_ALIGN float row_factor[kIntBlockRows];
    LoadFactors(rows_, factors_, start, count, row_factor);
    // Weights past the block's rows are zero (pairs with the zero row after an odd count).
    block_.Round(weights, heads_, weight_stride, 0, count, row_factor);
    unpacker_.Rows(start, count, index_.data());
    if (count % 2) std::memset(index_.data() + count * padded, 0, padded);
    const size_t even = count + count % 2;
    const KernelVector<int16_t>& block_words = block_.words;
    const KernelVector<float>& block_scale = block_.scale;
    const KernelVector<uint8_t>& live = block_.live;
    for (size_t c = 0; c < padded; c += chunk) {
      const size_t part = (kIntBlockRows * chunk + padded - 1) / padded;  // of the next block, per chunk
      FetchRows(rows_, start + kIntBlockRows + c / chunk * part, part, n_);
      size_t h = 0;
      VI32 sums[4][kParts];
      // Chunk c's sums for heads [first_head, first_head + group).
      auto accumulate = [&](size_t first_head, auto group) {
        constexpr int kGroup = decltype(group)::value;
        const int16_t* words = block_words.data() + first_head * kIntBlockRows;
        AccumulateChunk<kGroup>(index_.data(), padded, c, even, table, words, sums);
      };
      auto flush = [&](size_t first_head, size_t group) {
        for (size_t g = 0; g < group; ++g) {
          const size_t head = first_head + g;
          if (!live[head]) continue;
          const auto s = hn::Set(df, block_scale[head]);
          for (int k = 0; k < kParts; ++k) {
            float* target = lanes.Head(head) + c + k * quarter;
            hn::StoreU(hn::Add(hn::LoadU(df, target), hn::Mul(hn::ConvertTo(df, sums[g][k]), s)), df, target);
          }
        }
      };
      for (; h + 4 <= heads_; h += 4) {
        accumulate(h, std::integral_constant<int, 4>());
        flush(h, 4);
      }
      for (; h < heads_; ++h) {
        accumulate(h, std::integral_constant<int, 1>());
        flush(h, 1);
      }
    }
  }

 private:
  const RowSource& rows_;
  size_t n_, heads_, padded_;
  const Unpacker& unpacker_;
  const RowFactor* factors_;
  BlockWeights& block_;
  HWY_ALIGN int8_t table_[HWY_MAX_BYTES];
  KernelVector<uint8_t> index_;  // the block's rows unpacked, and a zero row after an odd count
};

// The block kernels of this target and the weighted sums' lane order.
using ShuffleScorer = GroupedScorer;
using ShuffleAccumulator = PairAccumulator;
KernelVector<uint32_t> ShuffleLaneCoordinates(size_t padded) { return PairLaneCoordinates(padded); }
#else
using ShuffleScorer = RowPairScorer;
using ShuffleAccumulator = QuadByteAccumulator;
KernelVector<uint32_t> ShuffleLaneCoordinates(size_t padded) { return QuadByteLaneCoordinates(padded); }
#endif

#endif  // KVSKETCH_INT_INDEX_X86

}  // namespace HWY_NAMESPACE
}  // namespace kvsketch::simd
KVSKETCH_INT_INDEX_END();

#endif  // KVSKETCH_SIMD_INT_INDEX_SHUFFLE_INL_H_
