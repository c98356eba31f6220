// Rows unpacked and looked up four at a time, straight into the layout the multiplies want
// (a Highway -inl module for target AVX3_DL only, on int_index_unpack-inl.h's Unpacker):
// QuadLookup for the weighted sums (AMX's B tiles, or vpdpbusd against byte weights without AMX),
// GroupedLookup for the VNNI scores.
//
// Why: looking a row up on its own (a gather of its bit fields and a vpermb) leaves its levels in coordinate
// order, and four rows then need four more shuffles to be interleaved by 128-bit blocks for
// vpdpbusd. A two-source vpermb gathers the code bytes of four rows at once (rows 0, 1 in the
// halves of one register, rows 2, 3 in the other) in whatever order is wanted, so that every output
// vector costs three shuffles: the gather, the vpmultishiftqb that pulls each field down, and the
// table's vpermb: fewer shuffles where shuffles and multiplies share a pipe (AMD's Zen 4). With
// 16-bit weights (as hi/lo bytes) the weighted sum gained nothing from these lookups (9 multiplies
// a row quad against vpdpwssd's 8); with byte weights it takes 4. Measured with
// kvsketch_bench_codecs --benchmark_filter='int_index/scores.*16384' (docs/RESULTS.md).
#if defined(KVSKETCH_SIMD_INT_INDEX_QUADS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVSKETCH_SIMD_INT_INDEX_QUADS_INL_H_
#undef KVSKETCH_SIMD_INT_INDEX_QUADS_INL_H_
#else
#define KVSKETCH_SIMD_INT_INDEX_QUADS_INL_H_
#endif

#include <numeric>

#include "simd/int_index_shuffle-inl.h"

KVSKETCH_INT_INDEX_BEGIN();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {

#if KVSKETCH_INT_INDEX_X86 && HWY_TARGET == HWY_AVX3_DL

// Where the weighted sums' accumulator lanes go when QuadLookup makes the values: lane l of a head
// holds coordinate l (out[m] of chunk k covers coordinates 64k + 16m .. 64k + 16m + 15).
KernelVector<uint32_t> QuadLaneCoordinates(size_t padded) {
  KernelVector<uint32_t> coordinate(padded);
  std::iota(coordinate.begin(), coordinate.end(), 0u);
  return coordinate;
}

// The bytes of chunk k of rows r0, r1 (one register) and r2, r3 (the other), each row in its own
// 32-byte half. Plain 32-byte loads where the rows go on for 32 bytes from the chunk's start (the
// bytes past the chunk only feed bits that the table lookup ignores, and coordinates past dim meet
// zero queries or dropped lanes); masked loads, several times slower on some CPUs, only where that
// would read past `end`.
struct RowPairs {
  __m512i a, b;
  HWY_INLINE RowPairs(__mmask64 chunk, size_t offset, const uint8_t* r0, const uint8_t* r1, const uint8_t* r2,
                      const uint8_t* r3, const uint8_t* end) {
    if (HWY_LIKELY(r3 + offset + 32 <= end)) {
      a = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + offset))),
                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r1 + offset)), 1);
      b = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r2 + offset))),
                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r3 + offset)), 1);
      return;
    }
    const __mmask64 high = chunk << 32;
    a = _mm512_mask_loadu_epi8(_mm512_maskz_loadu_epi8(chunk, r0 + offset), high, r1 + offset - 32);
    b = _mm512_mask_loadu_epi8(_mm512_maskz_loadu_epi8(chunk, r2 + offset), high, r3 + offset - 32);
  }
  // Four rows `stride` apart from r0, all readable for 32 bytes.
  HWY_INLINE RowPairs(const uint8_t* r0, size_t stride) {
    const auto load = [](const uint8_t* at) KVSKETCH_KERNEL_ATTR { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at)); };
    a = _mm512_inserti64x4(_mm512_castsi256_si512(load(r0)), load(r0 + stride), 1);
    b = _mm512_inserti64x4(_mm512_castsi256_si512(load(r0 + 2 * stride)), load(r0 + 3 * stride), 1);
  }
  // Gather (two-source vpermb), fields down (vpmultishiftqb), levels (vpermb over the table).
  HWY_INLINE __m512i Lookup(__m512i gather, __m512i shifts, __m512i table) const {
    return _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(shifts, _mm512_permutex2var_epi8(a, gather, b)),
                                   table);
  }
};

// The 32 bytes of a quad from `at` (quad_rows.hpp), as the low half of a vector: a plain load where
// they lie before `end`, else a masked one (the last quad's last octets).
HWY_INLINE __m512i QuadWindow(const uint8_t* at, const uint8_t* end) {
  if (HWY_LIKELY(at + 32 <= end))
    return _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at)));
  const __mmask32 live = _bzhi_u32(~0u, static_cast<unsigned>(end - at));
  return _mm512_castsi256_si512(_mm256_maskz_loadu_epi8(live, at));
}

// Chunk k of four rows looked up and interleaved for the weighted sums: out[m] dword lane c holds
// the four rows' bytes at coordinate 64k + 16m + c. Each qword of out[m] covers two coordinates of
// the four rows, at most two bytes of each row's codes (2 b <= 8 bits). Vectors wholly past dim
// (the last chunk of a head_dim that is not a multiple of 64: the outlier split's parts) need not
// be made: vectors() says how many reach below dim.
class QuadLookup {
 public:
  // (The table comes as bytes: a vector argument would cross std::vector's construction, which
  // is compiled without AVX-512 and passes it differently.)
  QuadLookup(const Unpacker& unpacker, size_t k, const uint8_t* table) {
    std::memcpy(table_, table, sizeof(table_));
    const int bits = unpacker.bits();
    offset_ = k * 8 * static_cast<size_t>(bits);
    chunk_ = unpacker.chunk_mask(k);
    vectors_ = std::min<size_t>(4, (unpacker.dim() - 64 * k + 15) / 16);
    for (int m = 0; m < 4; ++m)
      for (int c = 0; c < 16; c += 2) {  // the qword of dword lanes c, c + 1
        const int x = 16 * m + c;        // its first coordinate within the chunk
        const int first_byte = bits * x / 8;
        for (int t = 0; t < 4; ++t) {
          for (int j = 0; j < 2; ++j) gather_[m][4 * c + 2 * t + j] = static_cast<uint8_t>(32 * t + first_byte + j);
          // 16 coordinates start 16 b bits (whole bytes) further on: every m shifts alike.
          shifts_[4 * c + t] = static_cast<uint8_t>(16 * t + bits * x - 8 * first_byte);
          shifts_[4 * c + 4 + t] = static_cast<uint8_t>(16 * t + bits * (x + 1) - 8 * first_byte);
        }
      }
    // Quads: the 16 coordinates of an output vector are two octets, chunks of b bytes of each row
    // ((4s + t) b for octet s, row t) in 8 b bytes. Qword j (coordinates 2j, 2j + 1) takes the
    // two bytes of each row that hold them.
    quad_offset_ = 4 * offset_;
    for (int j = 0; j < 8; ++j) {
      const int s = j / 4, first_bit = bits * (2 * j % 8), first_byte = first_bit / 8;
      for (int t = 0; t < 4; ++t) {
        for (int k = 0; k < 2; ++k)
          quad_gather_[8 * j + 2 * t + k] = static_cast<uint8_t>(std::min((4 * s + t) * bits + first_byte + k, 31));
        quad_shifts_[8 * j + t] = static_cast<uint8_t>(16 * t + first_bit - 8 * first_byte);
        quad_shifts_[8 * j + 4 + t] = static_cast<uint8_t>(16 * t + first_bit + bits - 8 * first_byte);
      }
    }
    octet_pair_ = 8 * static_cast<size_t>(bits);
  }

  size_t vectors() const { return vectors_; }

  // out[m - kFirst] for kFirst <= m < kFirst + kVectors.
  template <int kVectors = 4, int kFirst = 0>
  HWY_INLINE void Make(const uint8_t* r0, const uint8_t* r1, const uint8_t* r2, const uint8_t* r3,
                       const uint8_t* end, __m512i* out) const {
    const RowPairs pairs(chunk_, offset_, r0, r1, r2, r3, end);
    const __m512i table = _mm512_loadu_si512(table_), shifts = _mm512_loadu_si512(shifts_);
    for (int m = 0; m < kVectors; ++m)
      out[m] = pairs.Lookup(_mm512_loadu_si512(gather_[kFirst + m]), shifts, table);
  }

  HWY_INLINE void operator()(const uint8_t* r0, const uint8_t* r1, const uint8_t* r2, const uint8_t* r3,
                             const uint8_t* end, __m512i* out) const {
    Make<4>(r0, r1, r2, r3, end, out);
  }

  // The same from the quad at `quad` (RowSource::quads): one load and a one-source gather a vector.
  template <int kVectors = 4, int kFirst = 0>
  HWY_INLINE void MakeFromQuad(const uint8_t* quad, const uint8_t* end, __m512i* out) const {
    const __m512i table = _mm512_loadu_si512(table_), shifts = _mm512_loadu_si512(quad_shifts_),
                  gather = _mm512_loadu_si512(quad_gather_);
    const uint8_t* chunk = quad + quad_offset_;
    for (int m = 0; m < kVectors; ++m) {
      const __m512i window = QuadWindow(chunk + (kFirst + m) * octet_pair_, end);
      out[m] = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(shifts, _mm512_permutexvar_epi8(gather, window)),
                                       table);
    }
  }

 private:
  // Byte arrays rather than vectors, so that the lookups (one per chunk) can live in a std::vector.
  uint8_t gather_[4][64], shifts_[64], table_[64], quad_gather_[64], quad_shifts_[64];
  __mmask64 chunk_;
  size_t offset_, vectors_, quad_offset_, octet_pair_;
};

// The weighted sums without AMX: a block's weights (within +-kWeightLargest, BlockWeights) as
// signed bytes, four rows' in one dword broadcast over the vector, against QuadLookup's levels of
// the same four rows plus 128 (unsigned bytes), so that one vpdpbusd takes 64 products where
// vpdpwssd on words took 32. sum(w v) = sum(w (v + 128)) - 128 sum(w), exactly the reference's
// sums (kvsketch_bench_codecs --benchmark_filter='int_index/weighted' times it). Vectors [kFirst,
// kFirst + kVectors) of the chunk: sums[h][m] for those m.
template <int kHeads, int kVectors, int kFirst = 0, bool kQuads = false>
HWY_INLINE void QuadChunkSums(const QuadLookup& lookup, const uint8_t* first, size_t stride, size_t count,
                              const uint8_t* end, const int8_t* weight_bytes, const int32_t* start,
                              __m512i (*sums)[4]) {
  // Accumulators in locals, written out once: through `sums` they would be stored every quad.
  // They start at start[h] (minus the offset's 128 sum(w)), so that the sums come out exact.
  __m512i acc[kHeads][kVectors];
  for (int h = 0; h < kHeads; ++h)
    for (int m = 0; m < kVectors; ++m) acc[h][m] = _mm512_set1_epi32(start[h]);
  const auto add = [&](const __m512i* v, size_t q) KVSKETCH_KERNEL_ATTR {
    for (int h = 0; h < kHeads; ++h) {
      int32_t quad;  // the weights of rows q..q+3, row q in the low byte
      std::memcpy(&quad, weight_bytes + h * kIntBlockRows + q, sizeof(quad));
      const __m512i w = _mm512_set1_epi32(quad);
      for (int m = 0; m < kVectors; ++m) acc[h][m] = _mm512_dpbusd_epi32(acc[h][m], v[m], w);
    }
  };
  // One loop body for the whole quads and the last: two copies of it kept GCC from giving the
  // accumulators fixed registers (it moved each one out and back around every multiply-add).
  for (size_t q = 0; q < count; q += 4) {
    __m512i v[kVectors];
    const uint8_t* row = first + q * stride;
    if constexpr (kQuads) {  // whole quads: count is a multiple of 4
      lookup.MakeFromQuad<kVectors, kFirst>(row, end, v);
      add(v, q);
      continue;
    }
    const uint8_t *r1 = row + stride, *r2 = row + 2 * stride, *r3 = row + 3 * stride;
    if (HWY_UNLIKELY(q + 4 > count)) {  // rows past count repeat the last (their weights are zero)
      const uint8_t* last = first + (count - 1) * stride;
      r1 = std::min(r1, last);
      r2 = std::min(r2, last);
      r3 = std::min(r3, last);
    }
    lookup.Make<kVectors, kFirst>(row, r1, r2, r3, end, v);
    add(v, q);
  }
  for (int h = 0; h < kHeads; ++h)
    for (int m = 0; m < kVectors; ++m) sums[h][kFirst + m] = acc[h][m];
}

// QuadChunkSums with the chunk's number of vectors as a constant. Eight heads take the chunk by
// halves (8 x 2 accumulators, as many as 4 x 4), so that each quad's look-ups serve eight heads
// where two groups of four made them twice.
template <int kHeads, bool kQuads>
HWY_INLINE void QuadChunkSumsOf(const QuadLookup& lookup, const uint8_t* first, size_t stride, size_t count,
                                const uint8_t* end, const int8_t* weight_bytes, const int32_t* start,
                                __m512i (*sums)[4]) {
  if constexpr (kHeads == 8) {
    const size_t vectors = lookup.vectors();
    if (vectors == 1)
      return QuadChunkSums<8, 1, 0, kQuads>(lookup, first, stride, count, end, weight_bytes, start, sums);
    QuadChunkSums<8, 2, 0, kQuads>(lookup, first, stride, count, end, weight_bytes, start, sums);
    if (vectors == 3) QuadChunkSums<8, 1, 2, kQuads>(lookup, first, stride, count, end, weight_bytes, start, sums);
    if (vectors == 4) QuadChunkSums<8, 2, 2, kQuads>(lookup, first, stride, count, end, weight_bytes, start, sums);
    return;
  }
  switch (lookup.vectors()) {
    case 1: return QuadChunkSums<kHeads, 1, 0, kQuads>(lookup, first, stride, count, end, weight_bytes, start, sums);
    case 2: return QuadChunkSums<kHeads, 2, 0, kQuads>(lookup, first, stride, count, end, weight_bytes, start, sums);
    case 3: return QuadChunkSums<kHeads, 3, 0, kQuads>(lookup, first, stride, count, end, weight_bytes, start, sums);
    default: return QuadChunkSums<kHeads, 4, 0, kQuads>(lookup, first, stride, count, end, weight_bytes, start, sums);
  }
}

// The VNNI weighted sums of blocks of rows into lane accumulators (QuadLaneCoordinates' order).
class QuadAccumulator {
 public:
  QuadAccumulator(const RowSource& rows, size_t n, const Unpacker& unpacker, __m512i field_table, size_t heads,
                  const RowFactor* factors, BlockWeights& block)
      : rows_(rows), n_(n), heads_(heads), factors_(factors), block_(block), end_(CodesEnd(rows, n)),
        weight_bytes_(heads * kIntBlockRows), start_at_(heads) {
    HWY_ALIGN uint8_t table_bytes[64];  // levels + 128 (xor of the sign bit), as unsigned bytes
    _mm512_store_si512(table_bytes, _mm512_xor_si512(field_table, _mm512_set1_epi8(-128)));
    const size_t padded = PaddedDim(rows.dim);
    for (size_t k = 0; k < padded / 64; ++k) lookups_.emplace_back(unpacker, k, table_bytes);
    part_ = (kIntBlockRows * 64 + padded - 1) / padded;
  }

  // The same rows' next segment (RowSegments): the RowSource this reads has moved to it.
  void NextSegment(size_t n) {
    n_ = n;
    end_ = CodesEnd(rows_, n);
  }

  // Rows [start, start + min(kIntBlockRows, n - start)) with weights weights[h * weight_stride + i]
  // for row start + i, added to head h's lanes at lanes.Head(h).
  // Not inlined, and its lambdas are: in other arrangements the compiler spilled the chunk's
  // accumulators.
  HWY_NOINLINE void Block(const float* weights, size_t weight_stride, size_t start, LaneAccumulators& lanes) {
    const size_t count = std::min(kIntBlockRows, n_ - start);
    HWY_ALIGN float row_factor[kIntBlockRows];
    LoadFactors(rows_, factors_, start, count, row_factor);
    // The weights straight to signed bytes, and 128 sum(w) from the same integers.
    block_.Round(weights, heads_, weight_stride, 0, count, row_factor, [&](size_t h, const VI32* rounded) KVSKETCH_KERNEL_ATTR {
      static_assert(BlockWeights::kVectors == 4);
      for (size_t v = 0; v < 4; ++v)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(weight_bytes_.data() + h * kIntBlockRows + 16 * v),
                         _mm512_cvtepi32_epi8(rounded[v].raw));
      const __m512i total = _mm512_add_epi32(_mm512_add_epi32(rounded[0].raw, rounded[1].raw),
                                             _mm512_add_epi32(rounded[2].raw, rounded[3].raw));
      start_at_[h] = -128 * _mm512_reduce_add_epi32(total);
    });
    // The members in locals: the accumulators' stores (may-alias vector stores) would otherwise
    // make every member be read again after each of them.
    const size_t stride = rows_.stride, n = n_, heads = heads_, part = part_, chunks = lookups_.size();
    const bool quads = rows_.quads;
    const uint8_t* first = rows_.data + start * stride;
    const uint8_t* end = end_;
    const QuadLookup* lookups = lookups_.data();
    const int8_t* weight_bytes = weight_bytes_.data();
    const int32_t* start_at = start_at_.data();
    const uint8_t* live = block_.live.data();
    const float* scales = block_.scale.data();
    float* const lane_base = lanes.Head(0);
    const size_t lanes_per_head = lanes.HeadStride();
    for (size_t k = 0; k < chunks; ++k) {
      FetchRows(rows_, start + kIntBlockRows + k * part, part, n);
      const QuadLookup& lookup = lookups[k];
      __m512i sums[8][4];
      const auto flush = [&](size_t first_head, size_t group) KVSKETCH_KERNEL_ATTR __attribute__((always_inline)) {
        for (size_t g = 0; g < group; ++g) {
          const size_t head = first_head + g;
          if (!live[head]) continue;
          const __m512 scale = _mm512_set1_ps(scales[head]);
          for (size_t m = 0; m < lookup.vectors(); ++m) {
            float* target = lane_base + head * lanes_per_head + 64 * k + 16 * m;
            const __m512 exact = _mm512_cvtepi32_ps(sums[g][m]);
            _mm512_storeu_ps(target, _mm512_add_ps(_mm512_loadu_ps(target), _mm512_mul_ps(exact, scale)));
          }
        }
      };
      const auto run = [&](size_t h, auto group) KVSKETCH_KERNEL_ATTR __attribute__((always_inline)) {
        constexpr int kGroup = decltype(group)::value;
        if (quads)
          QuadChunkSumsOf<kGroup, true>(lookup, first, stride, count, end, weight_bytes + h * kIntBlockRows,
                                        start_at + h, sums);
        else
          QuadChunkSumsOf<kGroup, false>(lookup, first, stride, count, end, weight_bytes + h * kIntBlockRows,
                                         start_at + h, sums);
        flush(h, kGroup);
      };
      size_t h = 0;
      for (; h + 8 <= heads; h += 8) run(h, std::integral_constant<int, 8>());
      for (; h + 4 <= heads; h += 4) run(h, std::integral_constant<int, 4>());
      for (; h < heads; ++h) run(h, std::integral_constant<int, 1>());
    }
  }

 private:
  const RowSource& rows_;
  size_t n_, heads_, part_;  // part_: rows of the next block to ask for, per chunk
  const RowFactor* factors_;
  BlockWeights& block_;
  const uint8_t* end_;
  KernelVector<QuadLookup> lookups_;
  KernelVector<int8_t> weight_bytes_;
  KernelVector<int32_t> start_at_;  // -128 sum(w) per head: where the sums start
};

void QuadWeightedSum(const RowSource& rows, size_t n, const Unpacker& unpacker, __m512i field_table,
                     const float* weights, size_t heads, size_t weight_stride, size_t padded, float* acc,
                     size_t acc_stride, const RowFactor* factors, BlockWeights& block) {
  LaneAccumulators lanes(acc, heads, acc_stride, rows.dim, QuadLaneCoordinates(padded));
  QuadAccumulator accumulator(rows, n, unpacker, field_table, heads, factors, block);
  for (size_t start = 0; start < n; start += kIntBlockRows)
    accumulator.Block(weights + start, weight_stride, start, lanes);
  lanes.WriteBack(acc);
}

// Chunk k of four rows looked up in the scores' grouped layout: out[kb] holds, in 128-bit block r,
// row r's 16 levels at coordinates 64k + 16kb .. 64k + 16kb + 15. A qword of it is 8 coordinates
// of one row, b whole bytes of its codes starting on a byte, so every qword shifts alike.
class GroupedLookup {
 public:
  GroupedLookup(const Unpacker& unpacker, size_t k) {
    const int bits = unpacker.bits();
    offset_ = k * 8 * static_cast<size_t>(bits);
    chunk_ = unpacker.chunk_mask(k);
    blocks_ = std::min<size_t>(4, (unpacker.dim() - 64 * k + 15) / 16);
    for (int kb = 0; kb < 4; ++kb)
      for (int r = 0; r < 4; ++r)
        for (int s = 0; s < 2; ++s)
          for (int j = 0; j < 8; ++j) {
            // Bytes past the row's own are other rows' or zeros: only the low b bits of a field count.
            const int byte = std::min(bits * (2 * kb + s) + j, 31);
            gather_[kb][16 * r + 8 * s + j] = static_cast<uint8_t>(64 * (r / 2) + 32 * (r % 2) + byte);
          }
    for (int e = 0; e < 64; ++e) shifts_[e] = static_cast<uint8_t>(bits * (e % 8));
    // Quads: the block's two octets of row r are chunks 4s + r (s = 0, 1) of b bytes; the same
    // gather for every block, from a load at the block's octet pair.
    for (int e = 0; e < 64; ++e)
      quad_gather_[e] = static_cast<uint8_t>(std::min((4 * (e % 16 / 8) + e / 16) * bits + e % 8, 31));
    quad_offset_ = 4 * offset_;
    octet_pair_ = 8 * static_cast<size_t>(bits);
  }

  __m512i Gather(int kb) const { return _mm512_loadu_si512(gather_[kb]); }
  __m512i QuadGather() const { return _mm512_loadu_si512(quad_gather_); }
  // Where block kb of this chunk starts in a quad.
  size_t QuadBlock(size_t kb) const { return quad_offset_ + kb * octet_pair_; }
  __m512i Shifts() const { return _mm512_loadu_si512(shifts_); }
  __mmask64 chunk() const { return chunk_; }
  size_t offset() const { return offset_; }
  // Blocks of 16 coordinates that reach below dim (the rest meet zero query bytes only).
  size_t blocks() const { return blocks_; }

 private:
  uint8_t gather_[4][64], shifts_[64], quad_gather_[64];
  __mmask64 chunk_;
  size_t offset_, blocks_, quad_offset_, octet_pair_;
};

// Sixteen rows' scores from `first`, row r at first + min(r, last) * stride (rows past `last`
// repeat it; their sums are not used; the rows end at `end`), through GroupedLookup and vpdpbusd
// against the grouped query bytes: head_sums[16 h + r] = row r's sum for head h, so that a head's
// scores leave as one vector (no per-row transpose of heads). kWhole: the sixteen rows are all
// there and every 32-byte load stays before `end`, so that the rows are addressed from `first`
// and loaded without checks. Not inlined: inside IntScoresImpl, with its pointers and loop state
// live, GCC spilled more of the sixteen accumulators.
// kChunks, kLastBlocks: the chunks and the last chunk's blocks as constants (the loops unrolled,
// no block count read); 0: from the lookups.
template <size_t kChunks, size_t kLastBlocks, bool kWhole, bool kQuads>
HWY_NOINLINE void QuadScoreGroups(const GroupedLookup* lookups, size_t chunks_, const uint8_t* first, size_t stride,
                                size_t last, const uint8_t* end, __m512i table, const int8_t* queries,
                                int32_t* head_sums) {
  const size_t chunks = kChunks != 0 ? kChunks : chunks_, lanes = 64, blocks = 4 * chunks;
  const __m512i shifts = lookups[0].Shifts();
  // All four groups of four rows at once: sixteen chains of multiply-adds, each query vector loaded
  // once for four of them. (Two groups at a time kept fewer values live, but GCC then folded every
  // query load into each vpdpbusd, twice per vector, which was slower.)
  const auto row = [&](size_t r) KVSKETCH_KERNEL_ATTR { return first + std::min(r, last) * stride; };
  __m512i acc[4][4];
  for (int g = 0; g < 4; ++g)
    for (int h = 0; h < 4; ++h) acc[g][h] = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (size_t k = 0; k < chunks; ++k) {
    const GroupedLookup& lookup = lookups[k];
    const int8_t* q = queries + 4 * k * lanes;
    // The last chunk of a head_dim that is not a multiple of 64 (the outlier split's parts, d = 32
    // and 96 for example) skips the blocks past dim: their sums are zero.
    const size_t live_blocks = kChunks == 0 ? lookup.blocks() : k + 1 == kChunks ? kLastBlocks : 4;
    // The blocks' products: per block kb, group g's levels from levels(g, kb, gather(kb)).
    const auto multiply = [&](const auto& gather, const auto& levels) KVSKETCH_KERNEL_ATTR __attribute__((always_inline)) {
#pragma GCC unroll 4
      for (int kb = 0; kb < 4; ++kb) {
        if (kb >= static_cast<int>(live_blocks)) break;
        const __m512i block_gather = gather(kb);
        __m512i query[4];
        for (int h = 0; h < 4; ++h) query[h] = _mm512_loadu_si512(q + (h * blocks + kb) * lanes);
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) {
          const __m512i group_levels = levels(g, kb, block_gather);
          for (int h = 0; h < 4; ++h) acc[g][h] = _mm512_dpbusd_epi32(acc[g][h], group_levels, query[h]);
        }
      }
    };
    if constexpr (kQuads) {
      // Group g is quad g (the quad of row `last` past it); a load and a one-source gather a block.
      const auto quad = [&](size_t g) KVSKETCH_KERNEL_ATTR { return first + 4 * (kWhole ? g : std::min(g, last / 4)) * stride; };
      const __m512i gather = lookup.QuadGather();
      multiply([&](int) KVSKETCH_KERNEL_ATTR __attribute__((always_inline)) { return gather; },
               [&](int g, int kb, __m512i block_gather) KVSKETCH_KERNEL_ATTR __attribute__((always_inline)) {
                 const uint8_t* at = quad(g) + lookup.QuadBlock(kb);
                 const __m512i window =
                     kWhole ? _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at)))
                            : QuadWindow(at, end);
                 return _mm512_permutexvar_epi8(
                     _mm512_multishift_epi64_epi8(shifts, _mm512_permutexvar_epi8(block_gather, window)), table);
               });
      continue;
    }
    const auto group = [&](size_t g) KVSKETCH_KERNEL_ATTR {
      if constexpr (kWhole)
        return RowPairs(first + 4 * g * stride + lookup.offset(), stride);
      else
        return RowPairs(lookup.chunk(), lookup.offset(), row(4 * g), row(4 * g + 1), row(4 * g + 2),
                        row(4 * g + 3), end);
    };
    const RowPairs pairs[4] = {group(0), group(1), group(2), group(3)};
    multiply([&](int kb) KVSKETCH_KERNEL_ATTR __attribute__((always_inline)) { return lookup.Gather(kb); },
             [&](int g, int, __m512i block_gather) KVSKETCH_KERNEL_ATTR __attribute__((always_inline)) {
               return pairs[g].Lookup(block_gather, shifts, table);
             });
  }
  // Per head, the halves of the reduction of the two pairs of groups: block r of pair p holds
  // (a0 + a2, b0 + b2, a1 + a3, b1 + b3) for the partial sums a, b of row r of groups 2p, 2p + 1.
  __m512i pair_sums[2][4];
  for (int p = 0; p < 2; ++p)
    for (int h = 0; h < 4; ++h)
      pair_sums[p][h] = _mm512_add_epi32(_mm512_unpacklo_epi32(acc[2 * p][h], acc[2 * p + 1][h]),
                                         _mm512_unpackhi_epi32(acc[2 * p][h], acc[2 * p + 1][h]));
  // Block r then holds rows r, 4 + r, 8 + r, 12 + r: lane 4r + g is row 4g + r.
  const __m512i rows_in_order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  for (int h = 0; h < 4; ++h) {
    const __m512i sums = _mm512_add_epi32(_mm512_unpacklo_epi64(pair_sums[0][h], pair_sums[1][h]),
                                          _mm512_unpackhi_epi64(pair_sums[0][h], pair_sums[1][h]));
    _mm512_store_si512(head_sums + 16 * h, _mm512_permutexvar_epi32(rows_in_order, sums));
  }
}

using ScoreGroupsFn = void (*)(const GroupedLookup*, size_t, const uint8_t*, size_t, size_t, const uint8_t*, __m512i,
                               const int8_t*, int32_t*);

// QuadScoreGroups for whole groups of sixteen rows, unrolled for rows of one or two chunks (d <= 128;
// the outlier split's parts among them) and for d = 256.
template <bool kQuads>
ScoreGroupsFn WholeScoreGroups(const KernelVector<GroupedLookup>& lookups) {
  static constexpr ScoreGroupsFn kUnrolled[2][4] = {
      {QuadScoreGroups<1, 1, true, kQuads>, QuadScoreGroups<1, 2, true, kQuads>, QuadScoreGroups<1, 3, true, kQuads>,
       QuadScoreGroups<1, 4, true, kQuads>},
      {QuadScoreGroups<2, 1, true, kQuads>, QuadScoreGroups<2, 2, true, kQuads>, QuadScoreGroups<2, 3, true, kQuads>,
       QuadScoreGroups<2, 4, true, kQuads>}};
  if (lookups.size() == 4 && lookups.back().blocks() == 4) return QuadScoreGroups<4, 4, true, kQuads>;
  if (lookups.size() > 2) return QuadScoreGroups<0, 0, true, kQuads>;
  return kUnrolled[lookups.size() - 1][lookups.back().blocks() - 1];
}

// The VNNI scores of blocks of rows: per block, the rows' factors, then each group of four heads
// over the block's groups of sixteen rows, as (sum - offset) * head factor * row factor, the
// reference's operations in its order.
class QuadScorer {
 public:
  QuadScorer(const RowSource& rows, size_t n, const Unpacker& unpacker, __m512i table, const ScoreQueries& queries,
             size_t heads, const RowFactor* factors)
      : rows_(rows), n_(n), table_(table), queries_(queries), heads_(heads), factors_(factors),
        end_(CodesEnd(rows, n)) {
    for (size_t k = 0; k < PaddedDim(rows.dim) / 64; ++k) lookups_.emplace_back(unpacker, k);
    whole_groups_ = rows.quads ? WholeScoreGroups<true>(lookups_) : WholeScoreGroups<false>(lookups_);
    partial_groups_ = rows.quads ? QuadScoreGroups<0, 0, false, true> : QuadScoreGroups<0, 0, false, false>;
    // How far past a group's first row its loads reach: the last quad's last block, or row 15's
    // last 32 bytes.
    const GroupedLookup& last = lookups_.back();
    reach_ = rows.quads ? 12 * rows.stride + last.QuadBlock(last.blocks() - 1) + 32
                        : 15 * rows.stride + last.offset() + 32;
  }

  // The same rows' next segment (RowSegments): the RowSource this reads has moved to it.
  void NextSegment(size_t n) {
    n_ = n;
    end_ = CodesEnd(rows_, n);
  }

  // Rows [start, start + min(kIntBlockRows, n - start)): head h's scores at out + h * out_stride.
  void Block(size_t start, float* out, size_t out_stride) const {
    const size_t count = std::min(kIntBlockRows, n_ - start), blocks = PaddedDim(rows_.dim) / 16;
    HWY_ALIGN float row_factor[kIntBlockRows];
    LoadFactors(rows_, factors_, start, count, row_factor);
    for (size_t hg = 0; 4 * hg < heads_; ++hg) {
      const int8_t* q = queries_.bytes.data() + 4 * hg * blocks * 64;
      for (size_t first_row = 0; first_row < count; first_row += 16) {
        if (hg == 0) FetchRows(rows_, start + kIntBlockRows + first_row, 16, n_);
        const uint8_t* first = rows_.data + (start + first_row) * rows_.stride;
        const size_t last = count - 1 - first_row;
        HWY_ALIGN int32_t head_sums[4 * 16];
        const auto groups = last >= 15 && first + reach_ <= end_ ? whole_groups_ : partial_groups_;
        groups(lookups_.data(), lookups_.size(), first, rows_.stride, last, end_, table_, q, head_sums);
        const __mmask16 live = static_cast<__mmask16>((1u << std::min<size_t>(16, count - first_row)) - 1);
        const __m512 row_factors = _mm512_load_ps(row_factor + first_row);
        for (size_t h = 0; h < 4 && 4 * hg + h < heads_; ++h) {
          const size_t head = 4 * hg + h;
          const __m512i sum = _mm512_sub_epi32(_mm512_load_si512(head_sums + 16 * h),
                                               _mm512_set1_epi32(queries_.offsets[head]));
          const __m512 score = _mm512_mul_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(queries_.factors[head]));
          _mm512_mask_storeu_ps(out + head * out_stride + first_row, live, _mm512_mul_ps(score, row_factors));
        }
      }
    }
  }

 private:
  const RowSource& rows_;
  size_t n_;
  __m512i table_;
  const ScoreQueries& queries_;
  size_t heads_;
  const RowFactor* factors_;
  const uint8_t* end_;
  KernelVector<GroupedLookup> lookups_;
  ScoreGroupsFn whole_groups_, partial_groups_;
  size_t reach_;
};

#endif  // KVSKETCH_INT_INDEX_X86 && HWY_TARGET == HWY_AVX3_DL

}  // namespace HWY_NAMESPACE
}  // namespace kvsketch::simd
KVSKETCH_INT_INDEX_END();

#endif  // KVSKETCH_SIMD_INT_INDEX_QUADS_INL_H_
