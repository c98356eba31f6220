// Highway implementations of row_kernels.hpp, compiled per instruction set. Each stored format is
// a small "rows" class that loads one vector of a row as floats; the two kernels are written once
// over it.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/simd/row_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>

#include "kvsketch/bitpack.hpp"
#include "kvsketch/half.hpp"
#include "simd/half_floats-inl.h"
#include "simd/row_feed.hpp"
#include "core/kernel_memory.hpp"
#include "simd/row_kernels.hpp"

HWY_BEFORE_NAMESPACE();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

struct FloatRows {
  const RowSource src;
  const uint8_t* Row(size_t i) const { return src.row(i); }
  const RowSource& Source() const { return src; }
  VF Load(const uint8_t* row, size_t j) const { return hn::LoadU(DF(), reinterpret_cast<const float*>(row) + j); }
  float Scalar(const uint8_t* row, size_t j) const { return reinterpret_cast<const float*>(row)[j]; }
};

struct HalfRows {
  const RowSource src;
  const uint8_t* Row(size_t i) const { return src.row(i); }
  const RowSource& Source() const { return src; }
  VF Load(const uint8_t* row, size_t j) const {
    return LoadHalves(DF(), row + 2 * j);
  }
  float Scalar(const uint8_t* row, size_t j) const {
    uint16_t h;
    std::memcpy(&h, row + 2 * j, 2);
    return half_to_float(h);
  }
};

// Rows of dim bytes, signed (int8) or unsigned (8-bit levels, q8_0's), converted in registers.
template <typename Byte>
struct ByteRows {
  const RowSource src;
  const uint8_t* Row(size_t i) const { return src.row(i); }
  const RowSource& Source() const { return src; }
  VF Load(const uint8_t* row, size_t j) const {
    const hn::Rebind<Byte, DF> db;
    const hn::Rebind<hwy::MakeWide<hwy::MakeWide<Byte>>, DF> dw;  // 32-bit, of the bytes' sign
    const hn::RebindToSigned<DF> di;
    return hn::ConvertTo(DF(), hn::BitCast(di, hn::PromoteTo(dw, hn::LoadU(db, reinterpret_cast<const Byte*>(row) + j))));
  }
  float Scalar(const uint8_t* row, size_t j) const { return static_cast<float>(static_cast<Byte>(row[j])); }
};
using Int8Rows = ByteRows<int8_t>;
using Uint8Rows = ByteRows<uint8_t>;

struct SignRows {
  const RowSource src;
  const uint8_t* Row(size_t i) const { return src.row(i); }
  const RowSource& Source() const { return src; }
  VF Load(const uint8_t* row, size_t j) const {
    const DF df;
    return hn::IfThenElse(hn::LoadMaskBits(df, row + j / 8), hn::Set(df, 1.0f), hn::Set(df, -1.0f));
  }
  float Scalar(const uint8_t* row, size_t j) const { return ((row[j >> 3] >> (j & 7)) & 1) ? 1.0f : -1.0f; }
  static bool Usable() { return hn::Lanes(DF()) % 8 == 0; }
};

#if HWY_TARGET != HWY_SCALAR
// b-bit indices (b <= 8) into a table of 2^b floats. A vector's indices lie in the 16 bytes
// loaded for it (repeated in every 128-bit block, as byte shuffles stay in blocks); each lane
// picks the bytes holding its index, shifts and masks, then looks the float up: in registers for
// tables of up to 2 * lanes floats, by a gather beyond (the wide widths of tq_pca's leading
// components, which took the scalar unpacking before).
template <int kBits>
class IndexRows {
 public:
  IndexRows(const RowSource& src, size_t n) : src_(src) {
    const DF df;
    const hn::RebindToUnsigned<DF> du;
    const hn::Repartition<uint8_t, decltype(du)> du8;
    const size_t lanes = hn::Lanes(df);
    HWY_ALIGN uint8_t picks[HWY_MAX_BYTES] = {};
    HWY_ALIGN uint32_t shifts[HWY_MAX_BYTES / 4] = {};
    for (size_t k = 0; k < lanes; ++k) {
      for (size_t t = 0; t < 4; ++t) picks[4 * k + t] = static_cast<uint8_t>(std::min<size_t>(kBits * k / 8 + t, 15));
      shifts[k] = static_cast<uint32_t>(kBits * k % 8);
    }
    pick_ = hn::Load(du8, picks);
    shift_ = hn::Load(du, shifts);
    if constexpr (kPermutes) {
      for (size_t t = 0; t < std::size(tables_); ++t) tables_[t] = hn::LoadU(df, src.table + t * lanes);
    } else if (!Gathers()) {
      // Room for every level, though only widths whose levels fit two vectors come here.
      constexpr size_t kLevels = size_t{1} << kBits;
      HWY_ALIGN float padded[std::max(2 * HWY_MAX_BYTES / sizeof(float), kLevels)] = {};
      std::memcpy(padded, src.table, kLevels * sizeof(float));
      low_ = hn::Load(df, padded);
      high_ = hn::Load(df, padded + lanes);
    }
    step_bytes_ = lanes * kBits / 8;
    row_bytes_ = packed_bytes(src.dim, kBits);
    // The last 16-byte load of a row may run past its indices; where it would run past the row,
    // the last row (in memory: of a gather, the highest index) is read from a padded copy.
    size_t steps = src.dim / lanes;
    const size_t readable = src.readable ? src.readable : src.stride;
    // A partial last vector is loaded whole where that load stays within what the rows may read
    // (the query is zero past dim; the indices there, of the next bits of the row, look up finite
    // values), instead of a scalar loop over its indices.
    const size_t whole = (src.dim + lanes - 1) / lanes;
    if (whole > steps && (whole - 1) * step_bytes_ + 16 <= std::min(readable + src.stride, sizeof(padded_row_))) {
      steps = whole;
      vector_end_ = whole * lanes;
    } else {
      vector_end_ = steps * lanes;
    }
    if (n > 0 && steps > 0 && (steps - 1) * step_bytes_ + 16 > readable) {
      last_ = src.indices ? static_cast<size_t>(std::max_element(src.indices, src.indices + n) - src.indices) : n - 1;
      std::memcpy(padded_row_, src.row(last_), row_bytes_);
    }
  }
  // Only the last row is read from a padded copy, so a load that runs past a row's readable bytes
  // must end within the next row's: rows shorter than that (a few coordinates) take ScalarIndexRows.
  static bool Usable(const RowSource& src) {
    const size_t lanes = hn::Lanes(DF());
    if (!(lanes >= 4 && lanes <= 16 && (lanes * kBits) % 8 == 0 &&
          packed_bytes(src.dim, kBits) <= sizeof(padded_row_) - 16))
      return false;
    const size_t steps = src.dim / lanes, readable = src.readable ? src.readable : src.stride;
    return steps == 0 || (steps - 1) * (lanes * kBits / 8) + 16 <= readable + src.stride;
  }
  const uint8_t* Row(size_t i) const { return i == last_ ? padded_row_ : src_.row(i); }
  const RowSource& Source() const { return src_; }
  // Coordinates the vector loads of the scores cover (VectorEnd): dim rounded up to whole vectors
  // where the constructor found the last load safe, else down.
  size_t ScoresVectorEnd() const { return vector_end_; }
  VF Load(const uint8_t* row, size_t j) const {
    const DF df;
    const hn::RebindToSigned<DF> di;
    const hn::RebindToUnsigned<DF> du;
    const hn::Repartition<uint8_t, decltype(du)> du8;
    const size_t lanes = hn::Lanes(df);
    const auto bytes = hn::LoadDup128(du8, row + j / lanes * step_bytes_);
    const auto words = hn::BitCast(du, hn::TableLookupBytes(bytes, pick_));
    const auto index = hn::BitCast(di, hn::And(hn::Shr(words, shift_), hn::Set(du, (1u << kBits) - 1u)));
#if HWY_TARGET <= HWY_AVX3
    if constexpr (kPermutes) {
      // vpermt2ps looks 32 entries up in two registers (index bits 0-4); bit 5 picks the pair.
      const VF first{_mm512_permutex2var_ps(tables_[0].raw, index.raw, tables_[1].raw)};
      if constexpr (kBits == 5) return first;
      const VF second{_mm512_permutex2var_ps(tables_[2].raw, index.raw, tables_[3].raw)};
      return VF{_mm512_mask_blend_ps(_mm512_test_epi32_mask(index.raw, _mm512_set1_epi32(32)), first.raw, second.raw)};
    }
#endif
    if (Gathers()) return hn::GatherIndex(df, src_.table, index);
    const auto wrapped = hn::IndicesFromVec(df, hn::And(index, hn::Set(di, static_cast<int32_t>(lanes - 1))));
    const auto in_low = hn::TableLookupLanes(low_, wrapped);
    if ((size_t{1} << kBits) <= lanes) return in_low;
    const auto in_first = hn::RebindMask(df, hn::Lt(index, hn::Set(di, static_cast<int32_t>(lanes))));
    return hn::IfThenElse(in_first, in_low, hn::TableLookupLanes(high_, wrapped));
  }
  float Scalar(const uint8_t* row, size_t j) const {
    const size_t bit = kBits * j;
    unsigned word = row[bit / 8];
    if (bit / 8 + 1 < row_bytes_) word |= static_cast<unsigned>(row[bit / 8 + 1]) << 8;
    return src_.table[(word >> (bit % 8)) & ((1u << kBits) - 1u)];
  }

 private:
  // AVX-512: tables of 32 and 64 entries are looked up in registers by two-table permutes (one
  // and two of them), where 64 took a gather (a single tq_pca query at d = 784 spent most of its
  // time on the widths of 5-8 bits).
#if HWY_TARGET <= HWY_AVX3
  static constexpr bool kPermutes = hn::MaxLanes(DF()) == 16 && (kBits == 5 || kBits == 6);
#else
  static constexpr bool kPermutes = false;
#endif
  static bool Gathers() { return !kPermutes && (size_t{1} << kBits) > 2 * hn::Lanes(DF()); }
  const RowSource& src_;
  hn::Vec<hn::Repartition<uint8_t, hn::RebindToUnsigned<DF>>> pick_;
  hn::Vec<hn::RebindToUnsigned<DF>> shift_;
  VF low_, high_;
  VF tables_[kPermutes ? (size_t{1} << kBits) / 16 : 1];
  size_t step_bytes_ = 0, row_bytes_ = 0, last_ = static_cast<size_t>(-1), vector_end_ = 0;
  uint8_t padded_row_[1024 + 16] = {};
};
#endif

// Any b: indices unpacked one at a time (formats without a vector path).
struct ScalarIndexRows {
  const RowSource src;
  const uint8_t* Row(size_t i) const { return src.row(i); }
  const RowSource& Source() const { return src; }
  float Scalar(const uint8_t* row, size_t j) const {
    const size_t bit = static_cast<size_t>(src.bits) * j, bytes = packed_bytes(src.dim, src.bits);
    unsigned word = row[bit / 8];
    if (bit / 8 + 1 < bytes) word |= static_cast<unsigned>(row[bit / 8 + 1]) << 8;
    return src.table[(word >> (bit % 8)) & ((1u << src.bits) - 1u)];
  }
  VF Load(const uint8_t* row, size_t j) const {
    HWY_ALIGN float values[HWY_MAX_BYTES / sizeof(float)];
    for (size_t k = 0; k < hn::Lanes(DF()); ++k) values[k] = Scalar(row, j + k);
    return hn::Load(DF(), values);
  }
};

// Four accumulators to their four sums, in one 128-bit vector: two interleave levels give each
// 128-bit block [s0 s1 s2 s3] of partial sums, then the blocks are folded.
#if HWY_TARGET != HWY_SCALAR
template <class D>
HWY_INLINE auto FoldBlocks(D d, hn::Vec<D> v) {
  if constexpr (hn::MaxLanes(D()) > 4) {
    const hn::Half<D> dh;
    return FoldBlocks(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  } else {
    (void)d;
    return v;
  }
}

HWY_INLINE auto SumFour(VF a0, VF a1, VF a2, VF a3) {
  const DF df;
  const hn::Repartition<uint64_t, DF> d64;
  const auto t01 = hn::Add(hn::InterleaveLower(df, a0, a1), hn::InterleaveUpper(df, a0, a1));
  const auto t23 = hn::Add(hn::InterleaveLower(df, a2, a3), hn::InterleaveUpper(df, a2, a3));
  const auto a = hn::BitCast(d64, t01), b = hn::BitCast(d64, t23);
  return FoldBlocks(df, hn::Add(hn::BitCast(df, hn::InterleaveLower(d64, a, b)),
                                hn::BitCast(df, hn::InterleaveUpper(d64, a, b))));
}

// One accumulator's sum in SumFour's order: a row scored alone (the last rows of a call) gets the
// bits it gets among four, so a row's score does not depend on where a range of rows starts.
HWY_INLINE float LaneSum(VF acc) {
  const auto zero = hn::Zero(DF());
  return hn::GetLane(SumFour(acc, zero, zero, zero));
}
#else
HWY_INLINE float LaneSum(VF acc) { return hn::GetLane(acc); }
#endif

// The tail of one row's dot product with a query: the columns past the last whole vector.
template <class Rows>
HWY_INLINE float TailDot(const Rows& rows, const uint8_t* row, size_t full, size_t d, const float* query) {
  float sum = 0.0f;
  for (size_t j = full; j < d; ++j) sum += query[j] * rows.Scalar(row, j);
  return sum;
}

// Rows are asked for kFetchAhead rows before their use (RowFeed): a gather's rows are scattered
// (no hardware prefetcher follows them), and contiguous rows cross a page every few rows, where
// the hardware prefetcher starts over. Into L2 (FetchLine), 64 rows ahead: fp16 scores from memory
// come close to their speed from cache this way, and T0 hints or fewer rows ahead did worse.
constexpr size_t kFetchAhead = 64;

// One row for up to kHeads heads.
template <class Rows, int kHeads>
HWY_INLINE void ScoreRow(const Rows& rows, size_t i, size_t full, size_t d, const float* queries, float scale,
                         float* out, size_t out_stride) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  const uint8_t* r = rows.Row(i);
  VF acc[kHeads];
  for (int h = 0; h < kHeads; ++h) acc[h] = hn::Zero(df);
  for (size_t j = 0; j < full; j += lanes) {
    const VF v = rows.Load(r, j);
    for (int h = 0; h < kHeads; ++h) acc[h] = hn::MulAdd(hn::LoadU(df, queries + h * d + j), v, acc[h]);
  }
  for (int h = 0; h < kHeads; ++h)
    out[h * out_stride + i] = (LaneSum(acc[h]) + TailDot(rows, r, full, d, queries + h * d)) * scale;
}

#if HWY_TARGET != HWY_SCALAR
// One head's scores of four rows from their accumulators (and the columns past the last vector).
template <class Rows>
HWY_INLINE void StoreFourScores(const Rows& rows, const uint8_t* const* r, size_t full, size_t d, const float* query,
                                float scale, float* out, VF b0, VF b1, VF b2, VF b3) {
  const hn::CappedTag<float, 4> d4;
  auto sums = SumFour(b0, b1, b2, b3);
  if (HWY_UNLIKELY(full < d)) {
    HWY_ALIGN float tails[4];
    for (int k = 0; k < 4; ++k) tails[k] = TailDot(rows, r[k], full, d, query);
    sums = hn::Add(sums, hn::Load(d4, tails));
  }
  hn::StoreU(hn::Mul(sums, hn::Set(d4, scale)), d4, out);
}

// Four rows for up to eight heads: the heads' accumulators share each row's load and conversion,
// and each head's four sums are reduced together and stored as one vector. The accumulators are
// named variables: as an array GCC keeps them on the stack between the loop and the sums (twice
// the time of the FMAs). Eight heads (32 accumulators, on targets with 32 registers) leave a few
// on the stack; their store-forwarded chains hide under the 32 FMAs of a step.
template <class Rows, int kHeads>
HWY_INLINE void ScoreFourRows(const Rows& rows, size_t i, size_t full, size_t d, const float* queries, float scale,
                              float* out, size_t out_stride, RowFeed& feed) {
  static_assert(kHeads >= 1 && kHeads <= 8);
  const DF df;
  const size_t lanes = hn::Lanes(df);
  const uint8_t *r0 = rows.Row(i), *r1 = rows.Row(i + 1), *r2 = rows.Row(i + 2), *r3 = rows.Row(i + 3);
  VF a00 = hn::Zero(df), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00, a13 = a00;
  VF a20 = a00, a21 = a00, a22 = a00, a23 = a00, a30 = a00, a31 = a00, a32 = a00, a33 = a00;
  VF b00 = a00, b01 = a00, b02 = a00, b03 = a00, b10 = a00, b11 = a00, b12 = a00, b13 = a00;  // heads 4-7
  VF b20 = a00, b21 = a00, b22 = a00, b23 = a00, b30 = a00, b31 = a00, b32 = a00, b33 = a00;
  for (size_t j = 0; j < full; j += lanes) {
    feed.Tick();
    const VF v0 = rows.Load(r0, j), v1 = rows.Load(r1, j), v2 = rows.Load(r2, j), v3 = rows.Load(r3, j);
    const auto step = [&](const float* q, VF& c0, VF& c1, VF& c2, VF& c3) {
      const VF qv = hn::LoadU(df, q + j);
      c0 = hn::MulAdd(qv, v0, c0);
      c1 = hn::MulAdd(qv, v1, c1);
      c2 = hn::MulAdd(qv, v2, c2);
      c3 = hn::MulAdd(qv, v3, c3);
    };
    step(queries, a00, a10, a20, a30);
    if constexpr (kHeads > 1) step(queries + d, a01, a11, a21, a31);
    if constexpr (kHeads > 2) step(queries + 2 * d, a02, a12, a22, a32);
    if constexpr (kHeads > 3) step(queries + 3 * d, a03, a13, a23, a33);
    if constexpr (kHeads > 4) step(queries + 4 * d, b00, b10, b20, b30);
    if constexpr (kHeads > 5) step(queries + 5 * d, b01, b11, b21, b31);
    if constexpr (kHeads > 6) step(queries + 6 * d, b02, b12, b22, b32);
    if constexpr (kHeads > 7) step(queries + 7 * d, b03, b13, b23, b33);
  }
  const uint8_t* r[4] = {r0, r1, r2, r3};
  const auto store = [&](int h, VF c0, VF c1, VF c2, VF c3) {
    StoreFourScores(rows, r, full, d, queries + h * d, scale, out + h * out_stride + i, c0, c1, c2, c3);
  };
  store(0, a00, a10, a20, a30);
  if constexpr (kHeads > 1) store(1, a01, a11, a21, a31);
  if constexpr (kHeads > 2) store(2, a02, a12, a22, a32);
  if constexpr (kHeads > 3) store(3, a03, a13, a23, a33);
  if constexpr (kHeads > 4) store(4, b00, b10, b20, b30);
  if constexpr (kHeads > 5) store(5, b01, b11, b21, b31);
  if constexpr (kHeads > 6) store(6, b02, b12, b22, b32);
  if constexpr (kHeads > 7) store(7, b03, b13, b23, b33);
}
#endif

// The columns the scores' vector loop covers: d rounded down to whole vectors, or up where the rows
// can load a partial last vector whole (IndexRows::ScoresVectorEnd).
template <class Rows>
HWY_INLINE size_t VectorEnd(const Rows& rows, size_t d) {
  if constexpr (requires { rows.ScoresVectorEnd(); }) {
    return rows.ScoresVectorEnd();
  } else {
    (void)rows;
    return d / hn::Lanes(DF()) * hn::Lanes(DF());
  }
}

template <class Rows, int kHeads>
void ScoresFor(const Rows& rows, size_t n, size_t d, const float* queries, float scale, float* out,
               size_t out_stride) {
  size_t full = VectorEnd(rows, d);
  // Loaded past d: the queries zero-padded to `full` columns, which then stand for d.
  KernelVector<float> padded;
  if (full > d) {
    padded.assign(kHeads * full, 0.0f);
    for (int h = 0; h < kHeads; ++h) std::copy_n(queries + h * d, d, padded.data() + h * full);
    queries = padded.data();
    d = full;
  }
  size_t i = 0;
#if HWY_TARGET != HWY_SCALAR
  if constexpr (hn::MaxLanes(DF()) >= 4) {
    // A tick per vector step of four rows (or per four rows, where no vector step is whole).
    const size_t steps = full / hn::Lanes(DF());
    RowFeed feed(rows.Source(), kFetchAhead, n, 4, std::max<size_t>(steps, 1));
    for (; i + 4 <= n; i += 4) {
      if (steps == 0) feed.Tick();
      ScoreFourRows<Rows, kHeads>(rows, i, full, d, queries, scale, out, out_stride, feed);
    }
  }
#endif
  for (; i < n; ++i) ScoreRow<Rows, kHeads>(rows, i, full, d, queries, scale, out, out_stride);
}

// The weighted sum's rows go in blocks of kWeightedBlock, several passes over each (a few output
// vectors per head at a time); its feed keeps a block ahead and ticks at every row of every pass:
// a pass that fetched nothing would leave the memory idle while it computes (with the whole fetch
// in the first pass, fp16 took as long from memory as its arithmetic and its reads added together).
constexpr size_t kWeightedBlock = 64;

// A block's row addresses and its weights interleaved by row: a pass keeps two pointers for them
// instead of one per head, and no row arithmetic (with the feed's counter as well, GCC spilled the
// pointers to the stack, which slowed the fp16 weighted sum).
template <int kHeads>
struct WeightedBlock {
  size_t count;
  const uint8_t* rows[kWeightedBlock];
  float weights[kWeightedBlock][kHeads];

  template <class Rows>
  WeightedBlock(const Rows& source, size_t start, size_t end, const float* w, size_t weight_stride)
      : count(end - start) {
    for (size_t k = 0; k < count; ++k) {
      rows[k] = source.Row(start + k);
      for (int h = 0; h < kHeads; ++h) weights[k][h] = w[h * weight_stride + start + k];
    }
  }
};

// One pass of WeightedSumFor over a block: kSteps vectors of the output per head, from column j,
// held in registers while the rows stream past them.
template <class Rows, int kHeads, int kSteps>
HWY_INLINE void WeightedPass(const Rows& rows, const WeightedBlock<kHeads>& block, size_t j, float* acc,
                             size_t acc_stride, RowFeed& feed) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  VF sum[kHeads][kSteps];
  for (int h = 0; h < kHeads; ++h)
    for (int s = 0; s < kSteps; ++s) sum[h][s] = hn::LoadU(df, acc + h * acc_stride + j + s * lanes);
#pragma GCC unroll 2
  for (size_t k = 0; k < block.count; ++k) {
    feed.Tick();
    const uint8_t* row = block.rows[k];
    VF w[kHeads];
    for (int h = 0; h < kHeads; ++h) w[h] = hn::Set(df, block.weights[k][h]);
    for (int s = 0; s < kSteps; ++s) {
      const VF v = rows.Load(row, j + s * lanes);
      for (int h = 0; h < kHeads; ++h) sum[h][s] = hn::MulAdd(w[h], v, sum[h][s]);
    }
  }
  for (int h = 0; h < kHeads; ++h)
    for (int s = 0; s < kSteps; ++s) hn::StoreU(sum[h][s], df, acc + h * acc_stride + j + s * lanes);
}

// Rows in blocks that stay in L1; within a block kSteps vectors of the output per head are held
// in registers while the rows stream past them.
template <class Rows, int kHeads, int kSteps>
void WeightedSumFor(const Rows& rows, size_t n, size_t d, const float* weights, size_t weight_stride, float* acc,
                    size_t acc_stride) {
  const size_t lanes = hn::Lanes(DF()), full = d / lanes * lanes, wide = kSteps * lanes;
  const size_t passes = std::max<size_t>(1, full / wide + full % wide / lanes);
  RowFeed feed(rows.Source(), kWeightedBlock, n, 1, passes);
  for (size_t start = 0; start < n; start += kWeightedBlock) {
    const WeightedBlock<kHeads> block(rows, start, std::min(n, start + kWeightedBlock), weights, weight_stride);
    size_t j = 0;
    for (; j + wide <= full; j += wide) WeightedPass<Rows, kHeads, kSteps>(rows, block, j, acc, acc_stride, feed);
    for (; j < full; j += lanes) WeightedPass<Rows, kHeads, 1>(rows, block, j, acc, acc_stride, feed);
    if (full == 0)  // no vector pass: the next block as a whole
      for (size_t k = 0; k < block.count; ++k) feed.Tick();
    for (size_t jj = full; jj < d; ++jj)
      for (size_t k = 0; k < block.count; ++k) {
        const float v = rows.Scalar(block.rows[k], jj);
        for (int h = 0; h < kHeads; ++h) acc[h * acc_stride + jj] += block.weights[k][h] * v;
      }
  }
}

// Output vectors held per head: as many as the registers allow.
constexpr int kWeightedSumSteps = HWY_TARGET <= HWY_AVX3 ? 4 : 2;

template <class Rows>
void ScoresAllHeads(const Rows& rows, size_t n, size_t d, const float* queries, size_t heads, float scale, float* out,
                    size_t out_stride) {
  size_t h = 0;
  if constexpr (HWY_TARGET <= HWY_AVX3) {  // 32 vector registers: eight heads a pass
    for (; h + 8 <= heads; h += 8)
      ScoresFor<Rows, 8>(rows, n, d, queries + h * d, scale, out + h * out_stride, out_stride);
  }
  for (; h + 4 <= heads; h += 4) ScoresFor<Rows, 4>(rows, n, d, queries + h * d, scale, out + h * out_stride, out_stride);
  const size_t rest = heads - h;
  const float* q = queries + h * d;
  float* o = out + h * out_stride;
  if (rest == 3) ScoresFor<Rows, 3>(rows, n, d, q, scale, o, out_stride);
  if (rest == 2) ScoresFor<Rows, 2>(rows, n, d, q, scale, o, out_stride);
  if (rest == 1) ScoresFor<Rows, 1>(rows, n, d, q, scale, o, out_stride);
}

template <class Rows>
void WeightedSumAllHeads(const Rows& rows, size_t n, size_t d, const float* weights, size_t heads,
                         size_t weight_stride, float* acc, size_t acc_stride) {
  size_t h = 0;
  if constexpr (HWY_TARGET <= HWY_AVX3) {  // 32 vector registers: eight heads of two vectors a pass
    for (; h + 8 <= heads; h += 8)
      WeightedSumFor<Rows, 8, kWeightedSumSteps / 2>(rows, n, d, weights + h * weight_stride, weight_stride,
                                                     acc + h * acc_stride, acc_stride);
  }
  for (; h + 4 <= heads; h += 4)
    WeightedSumFor<Rows, 4, kWeightedSumSteps>(rows, n, d, weights + h * weight_stride, weight_stride,
                                               acc + h * acc_stride, acc_stride);
  // One head alone holds twice the vectors: fewer passes over each block of rows (the same
  // products in the same order for every output coordinate, so the same bits).
  for (; h < heads; ++h)
    WeightedSumFor<Rows, 1, 2 * kWeightedSumSteps>(rows, n, d, weights + h * weight_stride, weight_stride,
                                                   acc + h * acc_stride, acc_stride);
}

// Calls `run` with the rows class of the source's format.
template <class Run>
void WithRows(const RowSource& src, size_t n, const Run& run) {
  switch (src.format) {
    case RowFormat::kFloat: return run(FloatRows{src});
    case RowFormat::kHalf: return run(HalfRows{src});
    case RowFormat::kInt8: return run(Int8Rows{src});
    case RowFormat::kUint8: return run(Uint8Rows{src});
    case RowFormat::kSign:
      if (SignRows::Usable()) return run(SignRows{src});
      break;
    case RowFormat::kIndex:
#if HWY_TARGET != HWY_SCALAR
      switch (src.bits) {
        case 1: if (IndexRows<1>::Usable(src)) return run(IndexRows<1>(src, n)); break;
        case 2: if (IndexRows<2>::Usable(src)) return run(IndexRows<2>(src, n)); break;
        case 3: if (IndexRows<3>::Usable(src)) return run(IndexRows<3>(src, n)); break;
        case 4: if (IndexRows<4>::Usable(src)) return run(IndexRows<4>(src, n)); break;
        case 5: if (IndexRows<5>::Usable(src)) return run(IndexRows<5>(src, n)); break;
        case 6: if (IndexRows<6>::Usable(src)) return run(IndexRows<6>(src, n)); break;
        case 7: if (IndexRows<7>::Usable(src)) return run(IndexRows<7>(src, n)); break;
        case 8: if (IndexRows<8>::Usable(src)) return run(IndexRows<8>(src, n)); break;
        default: break;
      }
#else
      (void)n;  // only the vector index rows pad their last row
#endif
      return run(ScalarIndexRows{src});
  }
  // Sign bits where a vector is not a whole number of bytes: as indices into {-1, +1}.
  static const float kSigns[2] = {-1.0f, 1.0f};
  RowSource as_index = src;
  as_index.format = RowFormat::kIndex;
  as_index.bits = 1;
  as_index.table = kSigns;
  run(ScalarIndexRows{as_index});
}

void RowScoresImpl(const RowSource& src, size_t n, const float* queries, size_t heads, float scale, float* out,
                   size_t out_stride) {
  WithRows(src, n, [&](const auto& rows) { ScoresAllHeads(rows, n, src.dim, queries, heads, scale, out, out_stride); });
}

void RowWeightedSumImpl(const RowSource& src, size_t n, const float* weights, size_t heads, size_t weight_stride,
                        float* acc, size_t acc_stride) {
  WithRows(src, n, [&](const auto& rows) {
    WeightedSumAllHeads(rows, n, src.dim, weights, heads, weight_stride, acc, acc_stride);
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace kvsketch::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvsketch::simd {

HWY_EXPORT(RowScoresImpl);
HWY_EXPORT(RowWeightedSumImpl);

void row_scores(const RowSource& rows, size_t n, const float* queries, size_t heads, float scale, float* out,
                size_t out_stride) {
  if (n == 0 || heads == 0) return;
  HWY_DYNAMIC_DISPATCH(RowScoresImpl)(rows, n, queries, heads, scale, out, out_stride);
}

void row_weighted_sum(const RowSource& rows, size_t n, const float* weights, size_t heads, size_t weight_stride,
                      float* acc, size_t acc_stride) {
  if (n == 0 || heads == 0) return;
  HWY_DYNAMIC_DISPATCH(RowWeightedSumImpl)(rows, n, weights, heads, weight_stride, acc, acc_stride);
}

}  // namespace kvsketch::simd
#endif
