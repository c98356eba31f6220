// Decode attention over b-bit index keys and values in one pass over blocks of rows, for every x86
// SIMD target (a Highway -inl module, the last of the integer-index kernels; int_index_kernels.cpp
// dispatches to it): through QuadScorer and QuadAccumulator on AVX3_DL, ShuffleScorer and
// ShuffleAccumulator elsewhere.
//
// Why: run as separate kernels, the scores of a range of rows go out to a heads x n array, a pass
// finds each head's maximum, a pass takes the exponentials, and the weighted sum reads them back:
// three round trips through L2 and a setup per kernel. Here each block's logits stay in L1 and
// its softmax is online (the running maximum rescales the sums when it grows), which shortens every
// TurboQuant policy's step (docs/RESULTS.md, "Kernel design measurements").
#if defined(KVSKETCH_SIMD_INT_INDEX_ATTENTION_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVSKETCH_SIMD_INT_INDEX_ATTENTION_INL_H_
#undef KVSKETCH_SIMD_INT_INDEX_ATTENTION_INL_H_
#else
#define KVSKETCH_SIMD_INT_INDEX_ATTENTION_INL_H_
#endif

#include <hwy/cache_control.h>

#include "simd/exp_non_positive-inl.h"
#include "simd/int_index_amx-inl.h"

KVSKETCH_INT_INDEX_BEGIN();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {

#if KVSKETCH_INT_INDEX_X86

// The target's block kernels, the tables they take and where their accumulator lanes go.
#if HWY_TARGET == HWY_AVX3_DL
using BlockScorer = QuadScorer;
using BlockAccumulator = QuadAccumulator;
__m512i ScorerTable(const ByteTable& table, int bits) { return FieldTable(table, bits, kScoreTableOffset); }
__m512i AccumulatorTable(const ByteTable& table, int bits) { return FieldTable(table, bits, 0); }
KernelVector<uint32_t> BlockLaneCoordinates(size_t padded) { return QuadLaneCoordinates(padded); }
// Whether the block kernels take rows of `padded` index bytes. They do on CPUs with AMX too: the
// one pass beat the AMX tile kernels' separate passes there (docs/RESULTS.md, "Kernel design
// measurements"). The separate kernels keep AMX.
bool BlockKernelsCover(size_t padded) { return Unpacker::FieldsCover(padded); }
#else
using BlockScorer = ShuffleScorer;
using BlockAccumulator = ShuffleAccumulator;
const ByteTable& ScorerTable(const ByteTable& table, int) { return table; }
const ByteTable& AccumulatorTable(const ByteTable& table, int) { return table; }
KernelVector<uint32_t> BlockLaneCoordinates(size_t padded) { return ShuffleLaneCoordinates(padded); }
bool BlockKernelsCover(size_t) { return true; }
#endif

// A key part's state: its lookups and byte queries (members in the order they are built).
struct KeyPartState {
  Unpacker unpacker;
  ByteTable table;
  ScoreQueries queries;
  BlockScorer scorer;
  KeyPartState(const AttentionPart& part, size_t n, size_t heads)
      : unpacker(part.rows, PaddedDim(part.rows.dim)),
        table(byte_table(part.rows.table, part.rows.bits, kScoreTableLargest)),
        queries(part.queries, heads, part.rows.dim, PaddedDim(part.rows.dim), table.scale, part.scale),
        scorer(part.rows, n, unpacker, ScorerTable(table, part.rows.bits), queries, heads, part.row_factor()) {}
};

// A value part's state: its lookups, the block's weights and its accumulators in lane order.
struct ValuePartState {
  Unpacker unpacker;
  ByteTable table;
  BlockWeights block;
  BlockAccumulator accumulator;
  LaneAccumulators lanes;
  ValuePartState(const AttentionPart& part, size_t n, size_t heads)
      : unpacker(part.rows, PaddedDim(part.rows.dim)),
        table(byte_table(part.rows.table, part.rows.bits)),
        block(heads, table.scale),
        accumulator(part.rows, n, unpacker, AccumulatorTable(table, part.rows.bits), heads, part.row_factor(), block),
        lanes(part.acc, heads, part.acc_stride, part.rows.dim, BlockLaneCoordinates(PaddedDim(part.rows.dim))) {}
};

// Turns the block's logits (head h at logits + h * kIntBlockRows, count of them) into weights
// exp(logit - max) against each head's running maximum, raised to the block's own where it is
// higher: the head's sum and every value part's accumulator lanes are then multiplied by
// exp(old - new) first. sums: a vector of partial sums per head (head h at sums + h * Lanes(df)).
HWY_INLINE void OnlineSoftmaxBlock(float* logits, size_t heads, size_t count, float* running, float* sums,
                                   LaneAccumulators* const* lanes, size_t value_parts) {
  const DF df;
  constexpr size_t kLanes = hn::MaxLanes(DF()), kVectors = kIntBlockRows / kLanes;
  const auto minus_infinity = hn::Set(df, -std::numeric_limits<float>::infinity());
  for (size_t h = 0; h < heads; ++h) {
    float* row = logits + h * kIntBlockRows;
    auto sum = hn::Load(df, sums + h * kLanes);
    hn::Vec<DF> v[kVectors];
    auto top = minus_infinity;
    for (size_t i = 0; i < kVectors; ++i) {
      const size_t live = count > i * kLanes ? std::min(kLanes, count - i * kLanes) : 0;
      v[i] = hn::IfThenElse(hn::FirstN(df, live), hn::Load(df, row + i * kLanes), minus_infinity);
      top = hn::Max(top, v[i]);
    }
    // The block's maximum matters only where it is above the running one. A compare of the lanes
    // says whether it is; the reduction to one number, a chain of shuffles on the way to every
    // weight, runs only then (mostly in the first blocks).
    if (!hn::AllFalse(df, hn::Gt(top, hn::Set(df, running[h])))) {
      const float block_max = hn::GetLane(hn::MaxOfLanes(df, top));
      if (running[h] != -std::numeric_limits<float>::infinity()) {  // else nothing was added yet
        const auto factor = ExpNonPositive(df, hn::Set(df, running[h] - block_max));
        sum = hn::Mul(sum, factor);
        for (size_t p = 0; p < value_parts; ++p) {
          float* head_lanes = lanes[p]->Head(h);
          for (size_t j = 0; j < lanes[p]->HeadStride(); j += kLanes)
            hn::StoreU(hn::Mul(hn::LoadU(df, head_lanes + j), factor), df, head_lanes + j);
        }
      }
      running[h] = block_max;
    }
    const auto shift = hn::Set(df, running[h]);
    for (size_t i = 0; i < kVectors; ++i) {
      const auto weight = ExpNonPositive(df, hn::Sub(v[i], shift));  // -inf past count: weight 0
      hn::Store(weight, df, row + i * kLanes);
      sum = hn::Add(sum, weight);
    }
    hn::Store(sum, df, sums + h * kLanes);
  }
}

// A range's running softmax: per head the running maximum and a vector of partial sums, turned
// into int_index_attention's max and sum at the end.
class OnlineSoftmax {
 public:
  explicit OnlineSoftmax(size_t heads)
      : heads_(heads), running_(heads, -std::numeric_limits<float>::infinity()),
        sums_(kernel_array<float>(heads * hn::Lanes(DF()))) {
    std::fill(sums_.get(), sums_.get() + heads * hn::Lanes(DF()), 0.0f);
  }

  // OnlineSoftmaxBlock over the block's logits.
  void Block(float* logits, size_t count, LaneAccumulators* const* lanes, size_t value_parts) {
    OnlineSoftmaxBlock(logits, heads_, count, running_.data(), sums_.get(), lanes, value_parts);
  }

  void Finish(float* max, float* sum) const {
    const DF df;
    for (size_t h = 0; h < heads_; ++h) {
      max[h] = running_[h];
      sum[h] = hn::GetLane(hn::SumOfLanes(df, hn::Load(df, sums_.get() + h * hn::Lanes(df))));
    }
  }

 private:
  size_t heads_;
  KernelVector<float> running_;
  KernelArray<float> sums_;
};

// A key group's state: its parts' states and its factor.
struct KeyGroupState {
  KernelVector<KernelPointer<KeyPartState>> parts;
  const RowSource* factor_rows;
  const RowFactor* factor;
};

// The block's scores from `start` (AttentionKeys) into logits, head h at logits + h * kIntBlockRows;
// group_scores and part_scores are scratch of the same size.
HWY_INLINE void KeyScoresBlock(const KernelVector<KeyGroupState>& groups, const float* shift, size_t heads,
                               size_t start, size_t count, float* logits, float* group_scores, float* part_scores) {
  const DF df;
  const size_t lanes = hn::Lanes(df), block = heads * kIntBlockRows;
  const auto add_into = [&](float* target, const float* addend) {
    for (size_t k = 0; k < block; k += lanes)
      hn::Store(hn::Add(hn::Load(df, target + k), hn::Load(df, addend + k)), df, target + k);
  };
  for (size_t g = 0; g < groups.size(); ++g) {
    const KeyGroupState& group = groups[g];
    float* target = g == 0 ? logits : group_scores;
    group.parts[0]->scorer.Block(start, target, kIntBlockRows);
    for (size_t p = 1; p < group.parts.size(); ++p) {
      group.parts[p]->scorer.Block(start, part_scores, kIntBlockRows);
      add_into(target, part_scores);
    }
    if (group.factor != nullptr) {
      HWY_ALIGN float row_factor[kIntBlockRows] = {};
      LoadFactors(*group.factor_rows, group.factor, start, count, row_factor);
      for (size_t h = 0; h < heads; ++h)
        for (size_t i = 0; i < kIntBlockRows; i += lanes) {
          float* at = target + h * kIntBlockRows + i;
          hn::Store(hn::Mul(hn::Load(df, at), hn::Load(df, row_factor + i)), df, at);
        }
    }
    if (g > 0) add_into(logits, group_scores);
  }
  if (shift != nullptr)
    for (size_t h = 0; h < heads; ++h)
      for (size_t i = 0; i < kIntBlockRows; i += lanes) {
        float* at = logits + h * kIntBlockRows + i;
        hn::Store(hn::Add(hn::Load(df, at), hn::Set(df, shift[h])), df, at);
      }
}

// Moves parts to segment s of `segments` (RowSegments): each copy's rows from its original's by the
// segment's shift.
HWY_INLINE void MoveParts(const AttentionPart* originals, AttentionPart* copies, size_t count,
                          const std::ptrdiff_t* shift, size_t s) {
  // In integers: the segments are separate allocations.
  for (size_t p = 0; p < count; ++p)
    copies[p].rows.data =
        reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(originals[p].rows.data) + shift[s]);
}

// The prefetch across a segment's end: within their segment the kernels ask for the next block's
// rows and, into L2, rows kFarBlocks blocks further on (FetchRows); near its end the next
// segment's rows kFarBlocks blocks on are asked into L2 here, as one long range would have them
// (a sequence's next page lies elsewhere in memory). Only into L2: asking for the next segment's
// first block into L1 as well, a block's lines at once, made every page cost more than the far
// requests alone (docs/RESULTS.md, "The paged multi-sequence cache").
HWY_INLINE void FetchNextSegment(const AttentionPart* parts, size_t count, const std::ptrdiff_t* shift,
                                 const RowSegments& segments, size_t s, size_t start) {
  if (s + 1 >= segments.count) return;
  const size_t n = segments.rows[s], next_rows = segments.rows[s + 1];
  const size_t ahead = start + (kFarBlocks + 1) * kIntBlockRows;
  if (ahead < n || ahead - n >= next_rows) return;
  const size_t row = ahead - n, rows = std::min(kIntBlockRows, next_rows - row);
  for (size_t p = 0; p < count; ++p) {
    const RowSource& source = parts[p].rows;
    const uintptr_t base = reinterpret_cast<uintptr_t>(source.data) + shift[s + 1];
    const uint8_t* first = reinterpret_cast<const uint8_t*>(base + row * source.stride);
    for (size_t at = 0; at < rows * source.stride; at += 64) FetchLine(first + at);
  }
}

// The common case, one key part and one value part (TurboQuant mse): its states on the stack, so
// that the compiler keeps their members in registers across the vector stores that may alias them
// (the general form below is slower for this case). The states read copies of the parts,
// which move from segment to segment.
bool SinglePartAttention(const AttentionPart& key_part, const AttentionPart& value_part, const RowSegments& segments,
                         size_t heads, float* max, float* sum) {
  if (!BlockKernelsCover(PaddedDim(key_part.rows.dim)) || !BlockKernelsCover(PaddedDim(value_part.rows.dim)))
    return false;
  AttentionPart key = key_part, value = value_part;
  KeyPartState key_state(key, segments.rows[0], heads);
  ValuePartState value_state(value, segments.rows[0], heads);
  LaneAccumulators* lanes[1] = {&value_state.lanes};
  OnlineSoftmax softmax(heads);
  const auto logits = kernel_array<float>(heads * kIntBlockRows);
  for (size_t s = 0; s < segments.count; ++s) {
    const size_t n = segments.rows[s];
    if (s > 0) {
      MoveParts(&key_part, &key, 1, segments.key_shift, s);
      MoveParts(&value_part, &value, 1, segments.value_shift, s);
      key_state.scorer.NextSegment(n);
      value_state.accumulator.NextSegment(n);
    }
    const BlockScorer& scorer = key_state.scorer;
    for (size_t start = 0; start < n; start += kIntBlockRows) {
      const size_t count = std::min(kIntBlockRows, n - start);
      FetchNextSegment(&key_part, 1, segments.key_shift, segments, s, start);
      FetchNextSegment(&value_part, 1, segments.value_shift, segments, s, start);
      scorer.Block(start, logits.get(), kIntBlockRows);
      softmax.Block(logits.get(), count, lanes, 1);
      value_state.accumulator.Block(logits.get(), kIntBlockRows, start, value_state.lanes);
    }
  }
  value_state.lanes.WriteBack(value.acc);
  softmax.Finish(max, sum);
  return true;
}

// int_index_attention for parts the block kernels cover (BlockKernelsCover), over segments. False,
// with nothing written, where it does not apply.
bool BlockAttention(const AttentionKeys& keys, const AttentionPart* values, size_t value_parts,
                    const RowSegments& segments, size_t heads, float* max, float* sum) {
  if (keys.count == 1 && keys.groups[0].count == 1 && !keys.groups[0].factor && !keys.shift && value_parts == 1)
    return SinglePartAttention(keys.groups[0].parts[0], values[0], segments, heads, max, sum);
  // The states read copies of the parts, which move from segment to segment.
  KernelVector<KernelVector<AttentionPart>> key_copies(keys.count);
  KernelVector<AttentionPart> value_copies(values, values + value_parts);
  KernelVector<KeyGroupState> key_groups(keys.count);
  KernelVector<KernelPointer<ValuePartState>> value_states;
  const size_t first_rows = segments.rows[0];
  for (size_t g = 0; g < keys.count; ++g) {
    const AttentionKeyGroup& group = keys.groups[g];
    key_copies[g].assign(group.parts, group.parts + group.count);
    key_groups[g].factor_rows = &key_copies[g][0].rows;
    key_groups[g].factor = group.factor;
    for (size_t p = 0; p < group.count; ++p) {
      if (!BlockKernelsCover(PaddedDim(group.parts[p].rows.dim))) return false;
      key_groups[g].parts.push_back(kernel_new<KeyPartState>(key_copies[g][p], first_rows, heads));
    }
  }
  for (size_t p = 0; p < value_parts; ++p) {
    if (!BlockKernelsCover(PaddedDim(values[p].rows.dim))) return false;
    value_states.push_back(kernel_new<ValuePartState>(value_copies[p], first_rows, heads));
  }
  KernelVector<LaneAccumulators*> value_lanes;
  for (const auto& value : value_states) value_lanes.push_back(&value->lanes);

  OnlineSoftmax softmax(heads);
  const size_t block = heads * kIntBlockRows;
  // The logits, and the scratch of later groups and parts: rows past a short last block are never
  // written (zeros or an earlier block's, added and then masked).
  const auto scratch = kernel_array<float>(3 * block);
  std::fill(scratch.get(), scratch.get() + 3 * block, 0.0f);
  float* logits = scratch.get();
  for (size_t s = 0; s < segments.count; ++s) {
    const size_t n = segments.rows[s];
    if (s > 0) {
      for (size_t g = 0; g < keys.count; ++g) {
        MoveParts(keys.groups[g].parts, key_copies[g].data(), keys.groups[g].count, segments.key_shift, s);
        for (auto& part : key_groups[g].parts) part->scorer.NextSegment(n);
      }
      MoveParts(values, value_copies.data(), value_parts, segments.value_shift, s);
      for (auto& value : value_states) value->accumulator.NextSegment(n);
    }
    for (size_t start = 0; start < n; start += kIntBlockRows) {
      const size_t count = std::min(kIntBlockRows, n - start);
      for (size_t g = 0; g < keys.count; ++g)
        FetchNextSegment(keys.groups[g].parts, keys.groups[g].count, segments.key_shift, segments, s, start);
      FetchNextSegment(values, value_parts, segments.value_shift, segments, s, start);
      KeyScoresBlock(key_groups, keys.shift, heads, start, count, logits, logits + block, logits + 2 * block);
      softmax.Block(logits, count, value_lanes.data(), value_parts);
      for (const auto& value : value_states) value->accumulator.Block(logits, kIntBlockRows, start, value->lanes);
    }
  }
  for (size_t p = 0; p < value_parts; ++p) value_states[p]->lanes.WriteBack(values[p].acc);
  softmax.Finish(max, sum);
  return true;
}

#endif  // KVSKETCH_INT_INDEX_X86

}  // namespace HWY_NAMESPACE
}  // namespace kvsketch::simd
KVSKETCH_INT_INDEX_END();

#endif  // KVSKETCH_SIMD_INT_INDEX_ATTENTION_INL_H_
