// Highway implementations of int_index_kernels.hpp: the dispatch to the kernel modules, each a
// self-contained Highway -inl header that includes the modules it builds on (target-inl: attributes
// and types; unpack; blocks: weights, accumulators, query bytes; avx2; shuffle; quads and amx, for
// AVX3_DL; attention). Rows are unpacked a block at a time into
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
#include "simd/fetch.hpp"
#include "core/kernel_memory.hpp"
#include "simd/int_index_kernels.hpp"
#include "simd/quad_rows.hpp"
#include "simd/int_index_attention-inl.h"  // and every module it builds on

KVSKETCH_INT_INDEX_BEGIN();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {

// Other architectures and the portable targets take the reference arithmetic, with the same bits.
#if !KVSKETCH_INT_INDEX_X86
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
KVSKETCH_INT_INDEX_END();

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
