// Highway implementations of int_index_kernels.hpp. Rows are unpacked a block at a time into
// index bytes (int_index_unpack-inl.h; in registers, or L1-resident), looked up in the byte table
// with byte shuffles and multiplied in integers: with AVX-512 VNNI and VBMI (target AVX3_DL) by
// vpdpbusd (or AMX tiles); on AVX2 and AVX3 by vpdpbusd where the CPU has VNNI, else pmaddubsw and
// pmaddwd (int_index_avx2-inl.h); elsewhere by pmaddubsw and pmaddwd (int_index_shuffle-inl.h).
// Every target computes the same integer sums, hence the same floats as reference::.
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
#include <deque>
#include <limits>
#include <memory>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "kvsketch/bitpack.hpp"
#include "core/require.hpp"
#include "simd/amx.hpp"
#include "simd/cpu_features.hpp"
#include "simd/exp_non_positive-inl.h"
#include "simd/half_floats-inl.h"
#include "simd/fetch.hpp"
#include "core/kernel_memory.hpp"
#include "simd/int_index_kernels.hpp"
#include "simd/quad_rows.hpp"

// Highway 1.0's target string for AVX3_DL names "avxvnni" (the VEX form) where the EVEX form is
// meant; the runtime check of the target includes AVX512-VNNI. AMX is enabled for the tile
// kernels of int_index_amx-inl.h, which run only where amx_usable() says so. GCC takes a pragma
// for the rest of the file (below); clang's pragma attribute must come before Highway's, as the
// outermost target attribute is the one that applies; lambdas with an attribute of their own
// take KVSKETCH_KERNEL_ATTR.
#undef KVSKETCH_KERNEL_ATTR
#if HWY_TARGET == HWY_AVX3_DL
#define KVSKETCH_KERNEL_ATTR __attribute__((target(HWY_TARGET_STR ",avx512vnni,amx-tile,amx-int8")))
#if defined(__clang__)
HWY_PUSH_ATTRIBUTES(HWY_TARGET_STR ",avx512vnni,amx-tile,amx-int8")
#endif
#else
#define KVSKETCH_KERNEL_ATTR HWY_ATTR
#endif
HWY_BEFORE_NAMESPACE();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET == HWY_AVX3_DL && !defined(__clang__)
#pragma GCC target("avx512vnni,amx-tile,amx-int8")  // see KVSKETCH_KERNEL_ATTR above
#endif

// The integer kernels are written with x86 instructions (pshufb, pmaddubsw, vpdpbusd); other
// architectures and the portable targets take the reference arithmetic, with the same bits.
#if !HWY_ARCH_X86 || HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128
void IntScoresImpl(const RowSource& rows, size_t n, const float* queries, size_t heads, float scale, float* out,
                   size_t out_stride, const RowFactor* factors) {
  reference::int_index_scores(rows, n, queries, heads, scale, out, out_stride, factors);
}
void IntWeightedSumImpl(const RowSource& rows, size_t n, const float* weights, size_t heads, size_t weight_stride,
                        float* acc, size_t acc_stride, const RowFactor* factors) {
  reference::int_index_weighted_sum(rows, n, weights, heads, weight_stride, acc, acc_stride, factors);
}
bool IntAttentionImpl(const AttentionKeys&, const AttentionPart*, size_t, const RowSegments&, size_t, float*,
                      float*) {
  return false;  // the caller runs the separate kernels
}
bool QuadsNativeImpl(const RowSource&) { return false; }
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

#include "simd/int_index_unpack-inl.h"

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

// One past the rows' last code byte: the bound of the kernels' plain loads. Not n strides from
// the first row, since the rows may be one part of longer rows (a channel split's).
const uint8_t* CodesEnd(const RowSource& rows, size_t n) {
  if (rows.quads) return rows.data + (n - 4) * rows.stride + 4 * packed_bytes(rows.dim, rows.bits);
  return rows.data + (n - 1) * rows.stride + packed_bytes(rows.dim, rows.bits);
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

bool IntAttentionImpl(const AttentionKeys& keys, const AttentionPart* values, size_t value_parts,
                      const RowSegments& segments, size_t heads, float* max, float* sum) {
  return BlockAttention(keys, values, value_parts, segments, heads, max, sum);
}

// Whether this target's fused kernel reads `rows` in quads as they lie: AVX3_DL's block kernels,
// for whole pairs of octets (dim a multiple of 16). Elsewhere they are copied back to plain rows.
bool QuadsNativeImpl(const RowSource& rows) {
#if HWY_TARGET == HWY_AVX3_DL
  return rows.dim % 16 == 0 && BlockKernelsCover(PaddedDim(rows.dim));
#else
  (void)rows;
  return false;
#endif
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace kvsketch::simd
HWY_AFTER_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL && defined(__clang__)
HWY_POP_ATTRIBUTES
#endif

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
HWY_EXPORT(QuadsNativeImpl);

namespace {

// Rows in quads as plain rows (the codes and the given factors), for the kernels that do not read
// quads: the same codes, so the same sums.
struct PlainCopy {
  std::vector<uint8_t> bytes;
  RowSource rows;
  PlainCopy(const RowSource& quads, size_t n, const std::vector<const RowFactor*>& factors)
      : bytes(rows_from_quads(quads, n, index_fields(quads, factors))), rows(quads) {
    rows.data = bytes.data();
    rows.quads = false;
  }
};

// int_index_attention's arguments with every part in quads that the target does not read as they
// lie replaced by a plain copy.
class PlainParts {
 public:
  PlainParts(const AttentionKeys& keys, const AttentionPart* values, size_t value_parts, size_t n)
      : key_parts_(keys.count), values_(values, values + value_parts) {
    const auto native = [](const RowSource& rows) { return !rows.quads || int_index_reads_quads(rows); };
    for (size_t g = 0; g < keys.count; ++g) {
      const AttentionKeyGroup& group = keys.groups[g];
      key_parts_[g].assign(group.parts, group.parts + group.count);
      for (size_t p = 0; p < group.count; ++p) {
        AttentionPart& part = key_parts_[g][p];
        if (native(part.rows)) continue;
        // The group's factor lies in its first part's rows.
        const std::vector<const RowFactor*> factors{part.row_factor(), p == 0 ? group.factor : nullptr};
        part.rows = copies_.emplace_back(part.rows, n, factors).rows;
      }
      groups_.push_back({key_parts_[g].data(), group.count, group.factor});
    }
    for (AttentionPart& part : values_)
      if (!native(part.rows)) part.rows = copies_.emplace_back(part.rows, n, std::vector{part.row_factor()}).rows;
    keys_ = {groups_.data(), groups_.size(), keys.shift};
  }
  const AttentionKeys& keys() const { return keys_; }
  const AttentionPart* values() const { return values_.data(); }

 private:
  std::deque<PlainCopy, KernelAllocator<PlainCopy>> copies_;
  KernelVector<KernelVector<AttentionPart>> key_parts_;
  KernelVector<AttentionKeyGroup> groups_;
  KernelVector<AttentionPart> values_;
  AttentionKeys keys_;
};

}  // namespace

bool int_index_reads_quads(const RowSource& rows) {
  return int_index_usable(rows) && HWY_DYNAMIC_DISPATCH(QuadsNativeImpl)(rows);
}

namespace {

// Whether any key or value part's rows satisfy `test`.
template <class Test>
bool any_part(const AttentionKeys& keys, const AttentionPart* values, size_t value_parts, const Test& test) {
  for (size_t g = 0; g < keys.count; ++g)
    for (size_t p = 0; p < keys.groups[g].count; ++p)
      if (test(keys.groups[g].parts[p].rows)) return true;
  return std::any_of(values, values + value_parts, [&](const AttentionPart& part) { return test(part.rows); });
}

}  // namespace

bool int_index_attention(const AttentionKeys& keys, const AttentionPart* values, size_t value_parts, size_t n,
                         size_t heads, float* max, float* sum) {
  const std::ptrdiff_t no_shift = 0;
  return int_index_attention_segments(keys, values, value_parts, RowSegments{1, &n, &no_shift, &no_shift}, heads, max,
                                      sum);
}

bool int_index_attention_segments(const AttentionKeys& keys, const AttentionPart* values, size_t value_parts,
                                  const RowSegments& segments, size_t heads, float* max, float* sum) {
  if (segments.count == 0 || heads == 0 || !int_index_attention_usable(keys, values, value_parts)) return false;
  for (size_t s = 0; s < segments.count; ++s)
    if (segments.rows[s] == 0) return false;
  if (any_part(keys, values, value_parts, [](const RowSource& rows) { return rows.quads; })) {
    for (size_t s = 0; s < segments.count; ++s)
      require(segments.rows[s] % 4 == 0, "int_index_attention: {} rows in quads is not a whole number of quads",
              segments.rows[s]);
    // Copies only where this target does not read the quads in place (PlainParts), and of one
    // segment: the caller takes several one at a time there.
    if (any_part(keys, values, value_parts,
                 [](const RowSource& rows) { return rows.quads && !int_index_reads_quads(rows); })) {
      if (segments.count > 1) return false;
      const PlainParts plain(keys, values, value_parts, segments.rows[0]);
      return HWY_DYNAMIC_DISPATCH(IntAttentionImpl)(plain.keys(), plain.values(), value_parts, segments, heads, max,
                                                    sum);
    }
  }
  return HWY_DYNAMIC_DISPATCH(IntAttentionImpl)(keys, values, value_parts, segments, heads, max, sum);
}

void int_index_scores(const RowSource& rows, size_t n, const float* queries, size_t heads, float scale, float* out,
                      size_t out_stride, const RowFactor* factors) {
  if (n == 0 || heads == 0) return;
  if (rows.quads) {
    const PlainCopy plain(rows, n, {factors});
    return HWY_DYNAMIC_DISPATCH(IntScoresImpl)(plain.rows, n, queries, heads, scale, out, out_stride, factors);
  }
  HWY_DYNAMIC_DISPATCH(IntScoresImpl)(rows, n, queries, heads, scale, out, out_stride, factors);
}

void int_index_weighted_sum(const RowSource& rows, size_t n, const float* weights, size_t heads,
                            size_t weight_stride, float* acc, size_t acc_stride, const RowFactor* factors) {
  if (n == 0 || heads == 0) return;
  if (rows.quads) {
    const PlainCopy plain(rows, n, {factors});
    return HWY_DYNAMIC_DISPATCH(IntWeightedSumImpl)(plain.rows, n, weights, heads, weight_stride, acc, acc_stride,
                                                    factors);
  }
  HWY_DYNAMIC_DISPATCH(IntWeightedSumImpl)(rows, n, weights, heads, weight_stride, acc, acc_stride, factors);
}

}  // namespace kvsketch::simd
#endif
