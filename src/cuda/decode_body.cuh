// The bodies of the decode kernels (decode_kernels.cu), as functions of a Context: its place in
// the grid (thread, block), the block's and warp's barriers, the warp's shuffles and mma, so that
// the same code runs on the GPU (DeviceContext there) and in a test's emulator on the CPU (one host
// thread per CUDA thread).
//
// One warp takes a run of 16-token tiles of one sequence and KV head (a split unit) and keeps its
// group of query heads (up to 16, the rows of one mma tile) in registers:
//   scores  S^T = Q' K^T with mma.m16n8k16 (fp16 in, fp32 out): the keys' B fragments are built in
//           registers from their codes by byte-permute look-ups in the codebook, never stored;
//           each thread owns a quarter of the coordinates (the same permutation on Q' and K).
//           tq_prod keys add a second product of the sketched query with their signs (a 1-bit
//           table), weighed by each token's residual norm; QJL keys have that product alone
//   softmax online, in the log2 domain (the query is pre-scaled by scale * log2 e)
//   values  O += (P * value norms) V with the same mma: the P fragment is the score tile's
//           accumulator layout, so it never leaves registers
// Its partial (max, sum, accumulator in the values' rotated domain) goes to the workspace; a
// second kernel merges the units of a sequence by log-sum-exp, un-rotates once per query head,
// and adds the fp16 sinks and window exactly. The fp16 body runs through the same code with
// 16-bit "codes" (the baseline of the same structure).
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "cuda/fragments.cuh"
#include "cuda/kernels.hpp"
#include "cuda/query_staging.cuh"
#include "cuda/warp_rotation.cuh"

namespace kvsketch::cuda::detail {

constexpr int kWarps = 4, kThreads = kWarps * 32;
constexpr int kExactChunk = 32;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Runs a warp-level step written for for_lanes (cuda/warp_rotation.cuh): each lane its own part on
// the GPU; on a context that runs threads apart, lane 0 does every lane's part (as for_lanes does
// on the host) while the others wait.
// The Context decides where it runs: a host context's calls are host code.
#pragma nv_exec_check_disable
template <typename Context, typename Step>
__host__ __device__ inline void for_warp(Context& ctx, int lane, Step&& step) {
  if constexpr (Context::kLanesApart) {
    if (lane == 0) step(0);
    ctx.sync_warp();
  } else {
    step(lane);
  }
}

// One block per split unit of a (sequence, KV head): its warps take the unit's tiles in turn and
// merge their states in shared memory at the end.
// `shared` holds decode_body_shared_floats<D, SIGNS>() floats: the staged queries (rotated; tq_prod
// and QJL: then sketched) until their fragments are in registers, then the warps' merged states:
// [max: group][sum: group][accumulator: group x D].
template <int D, bool SIGNS>
__host__ __device__ constexpr int decode_body_shared_floats() {
  constexpr int kStaged = kMaxGroupHeads * D * (SIGNS ? 2 : 1), kMerged = kMaxGroupHeads * (D + 2);
  return kStaged > kMerged ? kStaged : kMerged;
}

// The Context decides where it runs: a host context's calls are host code.
#pragma nv_exec_check_disable
template <int D, int KB, int VB, bool SIGNS, typename Context>
__host__ __device__ inline void decode_body(Context& ctx, float* shared, const DecodeShape& shape, const BodyView& body,
                                            const BatchView& batch, const float* queries, float* partials,
                                            int tokens_per_unit, int units) {
  float* rotated = shared;
  float* sketched = shared + kMaxGroupHeads * D;
  float* merged = shared;
  using Keys = Layout<D, KB>;
  using Values = Layout<D, VB>;
  const int warp = ctx.thread() / 32, lane = ctx.thread() % 32, g = lane / 4, c = lane % 4;
  const int unit = ctx.block_x(), head = ctx.block_y(), sequence = ctx.block_z();
  const int group = shape.group;
  const int tokens = min(batch.body_tokens[sequence], batch.max_body_tokens);
  const int begin = unit * tokens_per_unit, end = min(tokens, begin + tokens_per_unit);

  // The group's queries, rotated by the keys' rotation and scaled by scale * log2 e.
  for (int h = warp; h < group; h += kWarps) {
    const float* q = queries + ((static_cast<size_t>(sequence) * shape.kv_heads + head) * group + h) * D;
    for_warp(ctx, lane, [&](int l) {
      stage_query<SIGNS>(body, head, D, shape.scale * kLog2e, q, rotated + h * D, sketched + h * D, l);
    });
  }
  ctx.sync_block();

  // Q' fragments: rows g and g + 8 (query heads), k-step s's coordinates c D/4 + 4s + (0..3).
  uint32_t query[D / 16][4];
  query_fragments<D, KB>(rotated, group, g, c, query);
  uint32_t sketch_query[SIGNS ? D / 16 : 1][4];
  if constexpr (SIGNS) query_fragments<D>(sketched, group, g, c, sketch_query);
  ctx.sync_block();  // the staging is read before it holds the merged states

  float output[D / 8][4];
#pragma unroll
  for (int j = 0; j < D / 8; ++j) output[j][0] = output[j][1] = output[j][2] = output[j][3] = 0.0f;
  float running_max[2] = {-INFINITY, -INFINITY}, running_sum[2] = {0.0f, 0.0f};

  const int page_tokens = body.page_tokens;
  const int32_t* table = batch.block_tables + static_cast<size_t>(sequence) * batch.max_pages;
  const auto plane_of = [&](int token) {
    return (static_cast<size_t>(table[token / page_tokens]) * shape.kv_heads + head) * page_tokens +
           token % page_tokens;
  };
  constexpr int kStride = kWarps * kTile;
  const int first = begin + warp * kTile;
  Tile<D, KB, VB, SIGNS> tile;
  if (first < end) tile.load(body, plane_of(first), min(kTile, end - first), g, c);
  for (int start = first; start < end; start += kStride) {
    const int valid = min(kTile, end - start);
    Tile<D, KB, VB, SIGNS> next;
    if (start + kStride < end) next.load(body, plane_of(start + kStride), min(kTile, end - start - kStride), g, c);

    // Scores of heads (g, g + 8) x tokens (2c, 2c + 1) of each 8-token half: a split's second part
    // into scores1 (its norm differs), tq_prod's and QJL's signs into sign_scores.
    float scores[2][4], scores1[2][4], sign_scores[2][4];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      scores[half][0] = scores[half][1] = scores[half][2] = scores[half][3] = 0.0f;
      if constexpr (KB > 0)
#pragma unroll
        for (int s = 0; s < Keys::kCount0 / 16; ++s) {
          const uint2 b = quad_at<Keys::kBits0>(tile.keys[half], Keys::words(Keys::key_bits(0)), s, body.key_codebook);
          ctx.mma(scores[half], query[s], b.x, b.y);
        }
      scores1[half][0] = scores1[half][1] = scores1[half][2] = scores1[half][3] = 0.0f;
      if constexpr (Keys::kSplit)
#pragma unroll
        for (int s = 0; s < Keys::count(1) / 16; ++s) {
          const uint2 b = quad_at<Keys::kBits1>(tile.keys[half] + Keys::key_word(1), Keys::words(Keys::key_bits(1)), s,
                                                body.key_codebook1);
          ctx.mma(scores1[half], query[Keys::kCount0 / 16 + s], b.x, b.y);
        }
      sign_scores[half][0] = sign_scores[half][1] = sign_scores[half][2] = sign_scores[half][3] = 0.0f;
      if constexpr (SIGNS)
#pragma unroll
        for (int s = 0; s < D / 16; ++s) {
          const uint2 b = key_fragment<1>(tile.signs[half], s, body.sign_table);
          ctx.mma(sign_scores[half], sketch_query[s], b.x, b.y);
        }
    }
    float weights_of_values[4], weights_of_values1[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int token = score_token(c, i);
      weights_of_values[i] = VB == kHalfBits ? 1.0f : half_value(tile.value_norms[i]);
      weights_of_values1[i] = Values::kSplit ? half_value(tile.value_norms1[i]) : 0.0f;
      const bool inside = token < valid;
      // entry i: half i >> 1, token parity i & 1; rows g (index 0, 1) and g + 8 (2, 3)
      float& upper = scores[i >> 1][i & 1];
      float& lower = scores[i >> 1][2 + (i & 1)];
      const float upper_signs = sign_scores[i >> 1][i & 1], lower_signs = sign_scores[i >> 1][2 + (i & 1)];
      const float upper1 = scores1[i >> 1][i & 1], lower1 = scores1[i >> 1][2 + (i & 1)];
      upper = inside ? token_score<KB, SIGNS>(upper, upper1, upper_signs, tile.key_norms[i], tile.key_norms1[i],
                                              tile.gammas[i])
                     : -INFINITY;
      lower = inside ? token_score<KB, SIGNS>(lower, lower1, lower_signs, tile.key_norms[i], tile.key_norms1[i],
                                              tile.gammas[i])
                     : -INFINITY;
    }
    float scale_old[2];
#pragma unroll
    for (int row = 0; row < 2; ++row) {
      float tile_max = fmaxf(fmaxf(scores[0][2 * row], scores[0][2 * row + 1]),
                             fmaxf(scores[1][2 * row], scores[1][2 * row + 1]));
      tile_max = fmaxf(tile_max, ctx.shfl_xor(tile_max, 1));
      tile_max = fmaxf(tile_max, ctx.shfl_xor(tile_max, 2));
      const float new_max = fmaxf(running_max[row], tile_max);
      const float base = new_max == -INFINITY ? 0.0f : new_max;
      scale_old[row] = exp2f(running_max[row] - base);
      running_max[row] = new_max;
      float sum = 0.0f;
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int k = 0; k < 2; ++k) {
          const float p = exp2f(scores[half][2 * row + k] - base);
          scores[half][2 * row + k] = p;
          sum += p;
        }
      running_sum[row] = running_sum[row] * scale_old[row] + sum;
    }
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      output[j][0] *= scale_old[0], output[j][1] *= scale_old[0];
      output[j][2] *= scale_old[1], output[j][3] *= scale_old[1];
    }
    // P * value norms as the A fragment: rows g, g + 8; tokens (2c, 2c + 1), then + 8. A split's
    // parts have their own norms, so their own weights.
    uint32_t weights[4], weights1[4];
    weight_fragment(scores, weights_of_values, weights);
    if constexpr (Values::kSplit) weight_fragment(scores, weights_of_values1, weights1);
#pragma unroll
    for (int q4 = 0; q4 < Values::kCount0 / 32; ++q4) {
      uint2 pairs[4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        pairs[i] = quad_at<Values::kBits0>(tile.values[i], Values::words(Values::value_bits(0)), q4, body.value_codebook);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const uint2 b = value_fragment(pairs, k);
        ctx.mma(output[4 * q4 + k], weights, b.x, b.y);
      }
    }
    if constexpr (Values::kSplit)
#pragma unroll
      for (int q4 = 0; q4 < Values::count(1) / 32; ++q4) {
        uint2 pairs[4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
          pairs[i] = quad_at<Values::kBits1>(tile.values[i] + Values::value_word(1),
                                             Values::words(Values::value_bits(1)), q4, body.value_codebook1);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const uint2 b = value_fragment(pairs, k);
          ctx.mma(output[Values::kCount0 / 8 + 4 * q4 + k], weights1, b.x, b.y);
        }
      }
    tile = next;
  }
#pragma unroll
  for (int row = 0; row < 2; ++row) {
    running_sum[row] += ctx.shfl_xor(running_sum[row], 1);
    running_sum[row] += ctx.shfl_xor(running_sum[row], 2);
  }

  // The warps' states merged into shared memory one warp at a time, in rotated coordinates.
  float* maxima = merged;
  float* sums = merged + group;
  float* accumulators = merged + 2 * group;
  for (int w = 0; w < kWarps; ++w) {
    if (warp == w) {
      float keep[2], add[2], new_max[2];
#pragma unroll
      for (int row = 0; row < 2; ++row) {
        const int query_head = g + 8 * row;
        const float old_max = w == 0 || query_head >= group ? -INFINITY : maxima[query_head];
        new_max[row] = fmaxf(old_max, running_max[row]);
        const float base = new_max[row] == -INFINITY ? 0.0f : new_max[row];
        keep[row] = w == 0 ? 0.0f : exp2f(old_max - base);
        add[row] = exp2f(running_max[row] - base);
      }
#pragma unroll
      for (int j = 0; j < D / 8; ++j)
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const int row = k / 2, query_head = g + 8 * row, coordinate = value_coordinate<D, VB>(c, k, j);
          if (query_head >= group) continue;
          float& target = accumulators[query_head * D + coordinate];
          target = (w == 0 ? 0.0f : target * keep[row]) + output[j][k] * add[row];
        }
      ctx.sync_warp();
      if (c == 0)
#pragma unroll
        for (int row = 0; row < 2; ++row) {
          const int query_head = g + 8 * row;
          if (query_head >= group) continue;
          sums[query_head] = (w == 0 ? 0.0f : sums[query_head] * keep[row]) + running_sum[row] * add[row];
          maxima[query_head] = new_max[row];
        }
    }
    ctx.sync_block();
  }
  const int unit_floats = group * (D + 2);
  float* partial = partials + ((static_cast<size_t>(sequence) * shape.kv_heads + head) * units + unit) * unit_floats;
  for (int i = ctx.thread(); i < unit_floats; i += kThreads) partial[i] = merged[i];
}

// Block-wide reductions of one value per thread (kWarps warps).
// The Context decides where it runs: a host context's calls are host code.
#pragma nv_exec_check_disable
template <typename Context, typename Op>
__host__ __device__ inline float block_reduce(Context& ctx, float value, float* scratch, Op op) {
  for (int width = 16; width >= 1; width /= 2) value = op(value, ctx.shfl_xor(value, width));
  ctx.sync_block();
  if (ctx.thread() % 32 == 0) scratch[ctx.thread() / 32] = value;
  ctx.sync_block();
  float total = scratch[0];
  for (int w = 1; w < kWarps; ++w) total = op(total, scratch[w]);
  return total;
}

template <int D>
struct FinishShared {
  float accumulator[D], query[D], scattered[D], weights[kExactChunk], scratch[kWarps];
  float state[3];  // max, sum, rescale
};

// One block per (sequence, query head): merges the units, un-rotates, adds the exact tokens, writes.
// The Context decides where it runs: a host context's calls are host code.
#pragma nv_exec_check_disable
template <int D, typename Context>
__host__ __device__ inline void finish(Context& ctx, FinishShared<D>& shared, const DecodeShape& shape,
                                       const BodyView& body, const BatchView& batch, const float* queries,
                                       const float* partials, int units, float* output, float* lse) {
  float *accumulator = shared.accumulator, *query = shared.query, *scattered = shared.scattered;
  float *weights = shared.weights, *scratch = shared.scratch, *state = shared.state;
  const int warp = ctx.thread() / 32, lane = ctx.thread() % 32;
  const int h = ctx.block_x(), head = ctx.block_y(), sequence = ctx.block_z(), group = shape.group;
  const size_t unit_floats = static_cast<size_t>(group) * (D + 2);
  const float* unit_partials = partials + (static_cast<size_t>(sequence) * shape.kv_heads + head) * units * unit_floats;

  float best = -INFINITY;
  for (int u = ctx.thread(); u < units; u += kThreads) best = fmaxf(best, unit_partials[u * unit_floats + h]);
  best = block_reduce(ctx, best, scratch, [](float a, float b) { return fmaxf(a, b); });
  const float base = best == -INFINITY ? 0.0f : best;
  float sum = 0.0f;
  for (int u = ctx.thread(); u < units; u += kThreads)
    sum += exp2f(unit_partials[u * unit_floats + h] - base) * unit_partials[u * unit_floats + group + h];
  sum = block_reduce(ctx, sum, scratch, [](float a, float b) { return a + b; });
  const size_t row = (static_cast<size_t>(sequence) * shape.kv_heads + head) * group + h;
  for (int j = ctx.thread(); j < D; j += kThreads) {
    float total = 0.0f;
#pragma unroll 4
    for (int u = 0; u < units; ++u) {
      const float* partial = unit_partials + u * unit_floats;
      total += exp2f(partial[h] - base) * partial[2 * group + h * D + j];
    }
    accumulator[j] = total;
    query[j] = queries[row * D + j] * shape.scale * kLog2e;
  }
  // Centred keys: every body score gains the same shift, so only the body's maximum moves.
  if (ctx.thread() == 0) {
    state[0] = best + query_shift(body, head, D, shape.scale * kLog2e, queries + row * D);
    state[1] = sum;
  }
  ctx.sync_block();
  if (body.value_rotation.steps > 0 && warp == 0)
    for_warp(ctx, lane, [&](int l) {
      warp_rotate_transpose(body.value_rotation, head, accumulator, l);
      if (body.value_channels)  // a split's second part, after the first's rotation.dim coordinates
        warp_rotate_transpose(body.value_rotation1, head, accumulator + body.value_rotation.dim, l);
    });
  ctx.sync_block();
  if (body.value_channels) {  // the parts' coordinates back to their channels
    const uint16_t* channels = body.value_channels + static_cast<size_t>(head) * D;
    for (int j = ctx.thread(); j < D; j += kThreads) scattered[channels[j]] = accumulator[j];
    ctx.sync_block();
    for (int j = ctx.thread(); j < D; j += kThreads) accumulator[j] = scattered[j];
    ctx.sync_block();
  }

  if (body.value_mean)  // centred values: the mean times the body's weights
    for (int j = ctx.thread(); j < D; j += kThreads) accumulator[j] += sum * body.value_mean[static_cast<size_t>(head) * D + j];

  // The fp16 sinks and window, exactly, 32 tokens at a time.
  const int exact = batch.exact_tokens ? batch.exact_tokens[sequence] : 0;
  const size_t exact_base = (static_cast<size_t>(sequence) * shape.kv_heads + head) * batch.exact_capacity;
  for (int start = 0; start < exact; start += kExactChunk) {
    const int count = min(kExactChunk, exact - start);
    for (int t = warp; t < count; t += kWarps) {
      const uint16_t* key = batch.exact_keys + (exact_base + start + t) * D;
      float dot = 0.0f;
#pragma unroll
      for (int k = 0; k < D / 32; ++k) dot += __half2float(__ushort_as_half(key[lane + 32 * k])) * query[lane + 32 * k];
      for (int width = 16; width >= 1; width /= 2) dot += ctx.shfl_xor(dot, width);
      if (lane == 0) weights[t] = dot;
    }
    ctx.sync_block();
    if (warp == 0) {
      const float score = lane < count ? weights[lane] : -INFINITY;
      float chunk_max = score;
      for (int width = 16; width >= 1; width /= 2) chunk_max = fmaxf(chunk_max, ctx.shfl_xor(chunk_max, width));
      const float old_max = state[0], new_max = fmaxf(old_max, chunk_max);
      const float p = lane < count ? exp2f(score - new_max) : 0.0f;
      float chunk_sum = p;
      for (int width = 16; width >= 1; width /= 2) chunk_sum += ctx.shfl_xor(chunk_sum, width);
      weights[lane] = p;
      ctx.sync_warp();
      if (lane == 0) {
        const float rescale = old_max == -INFINITY ? 0.0f : exp2f(old_max - new_max);
        state[0] = new_max;
        state[1] = state[1] * rescale + chunk_sum;
        state[2] = rescale;
      }
    }
    ctx.sync_block();
    for (int j = ctx.thread(); j < D; j += kThreads) {
      float total = accumulator[j] * state[2];
      const uint16_t* values = batch.exact_values + (exact_base + start) * D + j;
#pragma unroll 8
      for (int t = 0; t < count; ++t) total += weights[t] * __half2float(__ushort_as_half(values[t * D]));
      accumulator[j] = total;
    }
    ctx.sync_block();
  }
  const float final_sum = state[1];
  for (int j = ctx.thread(); j < D; j += kThreads) output[row * D + j] = final_sum > 0.0f ? accumulator[j] / final_sum : 0.0f;
  if (ctx.thread() == 0 && lse) lse[row] = final_sum > 0.0f ? (state[0] + log2f(final_sum)) * kLn2 : -INFINITY;
}

// The split of a batch's tokens over thread blocks: units of tokens_per_unit tokens per (sequence,
// KV head).
struct Split {
  int tokens_per_unit, units;
};

inline Split split_of(const DecodeShape& shape, const BatchView& batch) {
  // About six blocks per multiprocessor of a 132-SM device, each unit at least 256 tokens (four per
  // warp's tile stride) so that its partial stays small beside the codes it reads.
  const long long total = static_cast<long long>(batch.batch) * shape.kv_heads * std::max(batch.max_body_tokens, 1);
  long long per_unit = (total + 791) / 792;
  constexpr int kUnitStep = kWarps * kTile;
  per_unit = std::max<long long>(4 * kUnitStep, (per_unit + kUnitStep - 1) / kUnitStep * kUnitStep);
  const int units = static_cast<int>((std::max(batch.max_body_tokens, 1) + per_unit - 1) / per_unit);
  return {static_cast<int>(per_unit), units};
}

}  // namespace kvsketch::cuda::detail
