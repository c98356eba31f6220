// Decode attention over b-bit index keys and values in one pass over blocks of rows (included by
// int_index_kernels.cpp for target AVX3_DL only; it uses QuadScorer and QuadAccumulator).
//
// Why: run as separate kernels, the scores of a range of rows go out to a heads x n array, a pass
// finds each head's maximum, a pass takes the exponentials, and the weighted sum reads them back:
// three round trips through L2 and a setup per kernel. Here each block's logits stay in L1 and
// its softmax is online (the running maximum rescales the sums when it grows): 221 -> 207 us for a
// cache-resident 16k-token step on the Emerald Rapids VM, and 257 -> 243 us from memory
// (docs/RESULTS.md).

// Turns the block's logits (head h at logits + h * kIntBlockRows, count of them) into weights
// exp(logit - max) against each head's running maximum, raised to the block's own where it is
// higher: the head's sum and accumulator lanes are then multiplied by exp(old - new) first.
// sums: a vector of partial sums per head (head h at sums + h * Lanes(df)).
HWY_INLINE void OnlineSoftmaxBlock(float* logits, size_t heads, size_t count, float* running, float* sums,
                                   LaneAccumulators& lanes, size_t lane_count) {
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
    const float block_max = hn::GetLane(hn::MaxOfLanes(df, top));
    if (block_max > running[h]) {
      if (running[h] != -std::numeric_limits<float>::infinity()) {  // else nothing was added yet
        const auto factor = ExpNonPositive(df, hn::Set(df, running[h] - block_max));
        sum = hn::Mul(sum, factor);
        float* head_lanes = lanes.Head(h);
        for (size_t j = 0; j < lane_count; j += kLanes)
          hn::StoreU(hn::Mul(hn::LoadU(df, head_lanes + j), factor), df, head_lanes + j);
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

// int_index_attention for rows the in-register lookups cover, without AMX (whose kernels run the
// separate passes). False, with nothing written, where it does not apply.
bool QuadAttention(const RowSource& keys, const RowFactor* key_factors, const RowSource& values,
                   const RowFactor* value_factors, size_t n, const float* queries, size_t heads, float scale,
                   float* max, float* sum, float* acc, size_t acc_stride) {
  const size_t d = keys.dim, padded = PaddedDim(d);
  if (values.dim != d || amx_usable()) return false;
  const Unpacker key_unpacker(keys, padded), value_unpacker(values, padded);
  if (!key_unpacker.fields_usable() || !value_unpacker.fields_usable()) return false;
  const ByteTable key_table = byte_table(keys.table, keys.bits, kScoreTableLargest);
  const ScoreQueries score_queries(queries, heads, d, padded, key_table.scale, scale);
  const QuadScorer scorer(keys, n, key_unpacker, FieldTable(key_table, keys.bits, kScoreTableOffset), score_queries,
                          heads, key_factors);
  const ByteTable value_table = byte_table(values.table, values.bits);
  BlockWeights block(heads, value_table.scale);
  QuadAccumulator accumulator(values, n, value_unpacker, FieldTable(value_table, values.bits, 0), heads,
                              value_factors, block);
  LaneAccumulators lanes(acc, heads, acc_stride, d, QuadLaneCoordinates(padded));

  const DF df;
  std::vector<float> running(heads, -std::numeric_limits<float>::infinity());
  const size_t lanes_per_vector = hn::Lanes(df);
  const auto sums = hwy::AllocateAligned<float>(heads * lanes_per_vector);
  std::fill(sums.get(), sums.get() + heads * lanes_per_vector, 0.0f);
  const auto logits = hwy::AllocateAligned<float>(heads * kIntBlockRows);
  for (size_t start = 0; start < n; start += kIntBlockRows) {
    const size_t count = std::min(kIntBlockRows, n - start);
    scorer.Block(start, logits.get(), kIntBlockRows);
    OnlineSoftmaxBlock(logits.get(), heads, count, running.data(), sums.get(), lanes, padded);
    accumulator.Block(logits.get(), kIntBlockRows, start, lanes);
  }
  lanes.WriteBack(acc);
  for (size_t h = 0; h < heads; ++h) {
    max[h] = running[h];
    sum[h] = hn::GetLane(hn::SumOfLanes(df, hn::Load(df, sums.get() + h * lanes_per_vector)));
  }
  return true;
}
