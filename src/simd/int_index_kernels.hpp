// Decode attention over rows of b-bit indices (b = 1..4) in integer arithmetic: the table and each
// query head are rounded to signed bytes, the weights to signed bytes per block of rows, the
// products are summed exactly in 32 bits and only the sums are scaled back to floats.
//
// Why: the float kernels (row_kernels.hpp) spend one multiply-add per value and head; with
// AVX-512 VNNI one instruction does 64 byte products, so a GQA group's scores and weighted sums
// cost a fraction of fp16's. Exact integer sums also make the result the same bits on every
// instruction set. The rounding adds little: the scores' table carries each centroid within 0.8%
// of the table's largest (0.4% for the weighted sums'), a weight within 0.4% of its block's
// largest, far below the b <= 4 quantization error (the tests bound the integer kernels' distance
// from the float kernels by a tenth of the codec's error: 0.0056 against 0.0069 at b = 3).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

#include "simd/row_kernels.hpp"

namespace kvsketch::simd {

// Rows per block: the weights of a block share one scale (rounded against the block's largest,
// so that a block of small weights keeps its precision).
inline constexpr size_t kIntBlockRows = 64;

// Whether the integer kernels take these rows: kIndex with b = 1..4.
bool int_index_usable(const RowSource& rows);

// A factor each row carries (TurboQuant's norm): fp16 or fp32 at row + offset, read in the same
// pass as the indices.
struct RowFactor {
  size_t offset = 0;
  bool half = true;
};

// out[h * out_stride + i] ~= scale * <queries[h], row i> * factor_i for h < heads, i < n, through
// the byte table and byte queries (factor_i = 1 without row factors).
void int_index_scores(const RowSource& rows, size_t n, const float* queries, size_t heads, float scale, float* out,
                      size_t out_stride, const RowFactor* factors = nullptr);

// acc[h * acc_stride + j] += ~sum_i weights[h * weight_stride + i] * factor_i * row i [j], the
// weighted factors of each block of kIntBlockRows rows rounded to integers within +-kWeightLargest
// against the block's largest magnitude.
void int_index_weighted_sum(const RowSource& rows, size_t n, const float* weights, size_t heads,
                            size_t weight_stride, float* acc, size_t acc_stride, const RowFactor* factors = nullptr);

// One stored part of every row for int_index_attention: b-bit indices (kIndex) with an optional
// factor per row (a norm). As keys it comes with its query heads (heads x rows.dim floats); as
// values, with the accumulators its weighted sums go to (head h's rows.dim floats at acc + h *
// acc_stride). A codec's row is one part (TurboQuant) or several (the outlier split's channels).
struct AttentionPart {
  RowSource rows;
  std::optional<RowFactor> factor;
  const float* queries = nullptr;
  float* acc = nullptr;
  size_t acc_stride = 0;
  float scale = 1.0f;  // keys: the scores' scale (int_index_scores' `scale`)

  const RowFactor* row_factor() const { return factor ? &*factor : nullptr; }
};

// Key parts whose scores add up: the sum over the parts, in their order, of int_index_scores of
// the part (times its scale and factor; the first part's score, then each next one added), times
// `factor` of parts[0].rows where there is one (TurboQuant prod: the norm over its scalar and sign
// parts).
struct AttentionKeyGroup {
  const AttentionPart* parts = nullptr;
  size_t count = 0;
  const RowFactor* factor = nullptr;
};

// The key side of int_index_attention: a row's score is the sum of the groups' scores, in their
// order (the first group's, then each next one added: the outlier split's parts), plus shift[h]
// for head h where there is one (centred keys: <q, mu>).
struct AttentionKeys {
  const AttentionKeyGroup* groups = nullptr;
  size_t count = 0;
  const float* shift = nullptr;
};

// Softmax pieces of attention over rows [0, n) for `heads` query heads, in one pass over blocks of
// kIntBlockRows rows: per block the scores (AttentionKeys); per head, the running maximum max[h]
// rises to the block's largest score (sum[h] and the head's accumulators are first multiplied by
// exp(old - new), exp as exp_shifted_sum takes it); the weights exp(score - max[h]) are added to
// sum[h] and their weighted sum of each value part to its accumulators, as int_index_weighted_sum
// adds it. max and sum are set; the accumulators come in zero. False, with nothing written, where
// no kernel applies (the scalar targets; AVX3_DL with parts wider than 1024
// coordinates): the caller then runs the separate kernels.
bool int_index_attention(const AttentionKeys& keys, const AttentionPart* values, size_t value_parts, size_t n,
                         size_t heads, float* max, float* sum);

// Rows in several segments (the pages of a paged cache), read one after another as one range: the
// per-query setup (byte tables, byte queries, lookups) is done once for all of them. Segment s
// holds rows[s] rows, each part's at its rows.data + key_shift[s] (key parts) or value_shift[s]
// (value parts); shift[0] is 0. Every segment starts a block of kIntBlockRows rows.
struct RowSegments {
  size_t count = 0;
  const size_t* rows = nullptr;
  const std::ptrdiff_t* key_shift = nullptr;
  const std::ptrdiff_t* value_shift = nullptr;
};

// int_index_attention over segments. False, with nothing written, where it does not apply (as
// int_index_attention, and where rows in quads would need a plain copy on this CPU).
bool int_index_attention_segments(const AttentionKeys& keys, const AttentionPart* values, size_t value_parts,
                                  const RowSegments& segments, size_t heads, float* max, float* sum);

// Whether int_index_attention reads these rows in quads as they lie on this CPU (else it copies
// them back to plain rows first, which costs more than the layout saves): AVX3_DL, dim a multiple
// of 16.
bool int_index_reads_quads(const RowSource& rows);

// Whether int_index_attention's arguments describe rows it can take: at least one key group and one
// value part, every group with parts, every part kIndex with b = 1..4 (int_index_usable).
bool int_index_attention_usable(const AttentionKeys& keys, const AttentionPart* values, size_t value_parts);

// Whether the 256-bit kernels of the targets without VBMI (AVX2, AVX3) may multiply by VNNI where
// the CPU has it (AVX-VNNI, AVX512-VNNI): on unless KVSKETCH_VNNI=0 is in the environment (to
// measure an AVX2 CPU without VNNI on one with it). set_shuffle_vnni_allowed(false) turns it off
// (tests check both forms on one machine; they give the same integer sums) and returns the previous
// setting. Not meant to race with running kernels.
bool shuffle_vnni_allowed();
bool set_shuffle_vnni_allowed(bool allowed);

// Row factors of rows [first, first + count) (1 without row factors).
void load_row_factors(const RowSource& rows, const RowFactor* factors, size_t first, size_t count, float* out);

// The scores' table has levels within +-63 and is stored plus 64 as unsigned bytes (1..127): a pair
// of products of such a byte with a signed query byte stays within int16, so pmaddubsw (AVX2, SSE)
// sums pairs without saturating and gives the exact sums vpdpbusd (VNNI) and the tiles (AMX) give.
// The weighted sums' table keeps +-127: without VNNI its products are taken in 16 bits; with VNNI
// it goes plus 128 (1..255, unsigned) against signed weight bytes, less 128 sum(w).
inline constexpr int kScoreTableLargest = 63;
inline constexpr int kScoreTableOffset = 64;
// The weighted sums' weights are rounded to integers within +-kWeightLargest per block: signed
// bytes, so that vpdpbusd takes 64 of their products at a time (16-bit weights through vpdpwssd
// take 32: the weighted sum then costs as much again as the scores).
inline constexpr int kWeightLargest = 127;

// The rounding both the kernels and the reference use (round to nearest even, IEEE single).
struct ByteTable {
  int8_t levels[16] = {};  // table[l] ~= levels[l] * scale, |levels| <= largest
  float scale = 0.0f;
};
ByteTable byte_table(const float* table, int bits, int largest = 127);
// out[j] = round(x[j] * largest / max|x|); returns max|x| / largest (0 when x is all zero).
float round_to_bytes(const float* x, size_t n, int8_t* out, int largest = 127);

namespace reference {
void int_index_scores(const RowSource& rows, size_t n, const float* queries, size_t heads, float scale, float* out,
                      size_t out_stride, const RowFactor* factors = nullptr);
void int_index_weighted_sum(const RowSource& rows, size_t n, const float* weights, size_t heads,
                            size_t weight_stride, float* acc, size_t acc_stride, const RowFactor* factors = nullptr);
// The definition block by block through the two references and exp_shifted_sum (hence the current
// target's exponentials); the sums are added in another order than the kernel's lanes.
bool int_index_attention(const AttentionKeys& keys, const AttentionPart* values, size_t value_parts, size_t n,
                         size_t heads, float* max, float* sum);
}  // namespace reference

}  // namespace kvsketch::simd
