// The 256-bit block kernels of AVX2, also run by AVX3 (AVX-512 without VBMI: Skylake-SP, Cascade
// Lake) on 256-bit vectors (a Highway -inl module, empty on the other targets): the rows
// unpacked in registers (ShuffleUnpacker::Chunk, 32 indices at a time on both) and multiplied in
// bytes, summed in 32 bits by ByteDot exactly as reference:: sums.
#if defined(KVSKETCH_SIMD_INT_INDEX_AVX2_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVSKETCH_SIMD_INT_INDEX_AVX2_INL_H_
#undef KVSKETCH_SIMD_INT_INDEX_AVX2_INL_H_
#else
#define KVSKETCH_SIMD_INT_INDEX_AVX2_INL_H_
#endif

#include "simd/cpu_features.hpp"
#include "simd/int_index_blocks-inl.h"

KVSKETCH_INT_INDEX_BEGIN();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {

#if KVSKETCH_INT_INDEX_X86 && (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3)

// acc lane e += u[4e] s[4e] + ... + u[4e + 3] s[4e + 3], u unsigned and s signed bytes, exactly:
// with VNNI one vpdpbusd (AVX-VNNI's VEX form on AVX2: Alder Lake and later, Sierra Forest, Zen 5;
// AVX512-VNNI's on AVX3: Cascade Lake), else pmaddubsw, whose pairs of products stay within int16
// for the kernels' operands, and pmaddwd by ones. The instruction is written in inline assembly, so
// that it needs no target attribute (the rest of the target's code may not assume VNNI) and runs
// only where ShuffleVnniUsable() says so.
template <bool kVnni>
HWY_INLINE __m256i ByteDot(__m256i acc, __m256i u, __m256i s) {
  if constexpr (kVnni) {
#if HWY_TARGET == HWY_AVX2
    asm("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(s));
#else
    asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
#endif
    return acc;
  } else {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
}

// Whether this CPU has the VNNI form ByteDot<true> uses and it is allowed (set_shuffle_vnni_allowed).
bool ShuffleVnniUsable() {
#if HWY_TARGET == HWY_AVX2
  const bool has = cpu_has_avx_vnni();
#else
  const bool has = cpu_has_avx512_vnni();
#endif
  return has && shuffle_vnni_allowed();
}

// The table's levels plus `offset` in both 128-bit blocks of 32 bytes, for the byte shuffles.
HWY_INLINE void TableBytes(const ByteTable& table, int offset, uint8_t* out) {
  for (int l = 0; l < 16; ++l) out[l] = out[16 + l] = static_cast<uint8_t>(table.levels[l] + offset);
}

// Chunks of 32 indices that reach below dim: the 256-bit kernels skip the rest (AVX3's rows are
// padded to 64, so a split's 32-channel part would otherwise take twice the work).
HWY_INLINE size_t LiveChunks(size_t dim) { return (dim + 31) / 32; }

// Per 128-bit block b: the sums of heads 0..3 of the row whose partial sums block b of acc[h] holds
// (BlockHeadSums on 256 bits).
HWY_INLINE __m256i HeadSums(const __m256i* acc) {
  using D256 = hn::Full256<int32_t>;
  const hn::Vec<D256> heads[4] = {{acc[0]}, {acc[1]}, {acc[2]}, {acc[3]}};
  return BlockHeadSums(D256(), heads).raw;
}

// The scores of blocks of rows, two rows at a time: each chunk of 32 indices of the two rows
// unpacked and looked up, its 128-bit halves paired into the grouped layout (block k of both rows in
// one vector) and multiplied against the four heads' query bytes. GroupedScorer stores the unpacked
// block and reads it back, which is slower on AVX2.
class RowPairScorer {
 public:
  RowPairScorer(const RowSource& rows, size_t n, const Unpacker& unpacker, const ByteTable& table,
                const ScoreQueries& queries, size_t heads, const RowFactor* factors)
      : rows_(rows), n_(n), shuffle_(unpacker.shuffle()), queries_(queries), heads_(heads), factors_(factors),
        chunks_(LiveChunks(rows.dim)), blocks_(PaddedDim(rows.dim) / 16), vnni_(ShuffleVnniUsable()) {
    TableBytes(table, kScoreTableOffset, table_);
  }

  // The same rows' next segment (RowSegments): the RowSource this reads has moved to it.
  void NextSegment(size_t n) {
    n_ = n;
  }

  // Rows [start, start + min(kIntBlockRows, n - start)): head h's scores at out + h * out_stride.
  void Block(size_t start, float* out, size_t out_stride) const {
    if (vnni_) return WithChunks<true>(start, out, out_stride);
    WithChunks<false>(start, out, out_stride);
  }

 private:
  // Full rows (ShuffleUnpacker::full_rows) in 1-4 or 8 chunks (head dims up to 256) take a loop
  // unrolled at compile time with no test of the row's form.
  template <bool kVnni>
  HWY_INLINE void WithChunks(size_t start, float* out, size_t out_stride) const {
    if (shuffle_.full_rows()) {
      switch (chunks_) {
        case 1: return BlockWith<kVnni, 1>(start, out, out_stride);
        case 2: return BlockWith<kVnni, 2>(start, out, out_stride);
        case 3: return BlockWith<kVnni, 3>(start, out, out_stride);
        case 4: return BlockWith<kVnni, 4>(start, out, out_stride);
        case 8: return BlockWith<kVnni, 8>(start, out, out_stride);
        default: break;
      }
    }
    BlockWith<kVnni, 0>(start, out, out_stride);
  }

  // kChunks = 0: chunks_ of them, any row form.
  template <bool kVnni, size_t kChunks>
  void BlockWith(size_t start, float* out, size_t out_stride) const {
    constexpr bool kFull = kChunks != 0;
    const size_t count = std::min(kIntBlockRows, n_ - start), chunks = kFull ? kChunks : chunks_,
                 stride = rows_.stride, n = n_;
    // The query bytes of block k of head h at (h * blocks + k) * lanes (ScoreQueries), repeated over
    // every 128-bit block of a vector of `lanes` bytes (32 on AVX2, 64 on AVX3: its first 32 serve).
    const size_t blocks = blocks_, lanes = hn::Lanes(DU8());
    HWY_ALIGN float row_factor[kIntBlockRows];
    LoadFactors(rows_, factors_, start, count, row_factor);
    const ShuffleUnpacker::Constants constants = shuffle_.constants();
    const __m256i table = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(table_));
    const uint8_t* first = rows_.data + start * stride;
    HWY_ALIGN int32_t sums[4 * kIntBlockRows];  // sums[4 r + h]: row r, head h of the group
    HWY_ALIGN float scores[4 * kIntBlockRows];
    for (size_t hg = 0; 4 * hg < heads_; ++hg) {
      const int8_t* q = queries_.bytes.data() + 4 * hg * blocks * lanes;
      for (size_t r = 0; r < count; r += 2) {
        if (hg == 0 && r % 4 == 0) FetchRows(rows_, start + kIntBlockRows + r, 4, n);
        const uint8_t* a = first + r * stride;
        const uint8_t* b = r + 1 < count ? a + stride : a;  // past count: row r again, its sums unused
        __m256i acc[4];
        for (int h = 0; h < 4; ++h) acc[h] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (size_t k = 0; k < chunks; ++k) {
          const __m256i la = _mm256_shuffle_epi8(table, ShuffleUnpacker::Chunk<kFull>(constants, a, k).raw);
          const __m256i lb = _mm256_shuffle_epi8(table, ShuffleUnpacker::Chunk<kFull>(constants, b, k).raw);
          const __m256i even = _mm256_permute2x128_si256(la, lb, 0x20), odd = _mm256_permute2x128_si256(la, lb, 0x31);
          for (int h = 0; h < 4; ++h) {
            const int8_t* qh = q + (h * blocks + 2 * k) * lanes;
            const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh));
            const __m256i q1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh + lanes));
            acc[h] = ByteDot<kVnni>(ByteDot<kVnni>(acc[h], even, q0), odd, q1);
          }
        }
        // Rows r, r + 1: heads 0..3 each.
        _mm256_store_si256(reinterpret_cast<__m256i*>(sums + 4 * r), HeadSums(acc));
      }
      const __m256 factor_v = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(queries_.factors.data() + 4 * hg));
      const __m256i offset_v =
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(queries_.offsets.data() + 4 * hg)));
      for (size_t r = 0; r < count; r += 2) {
        const __m256i sum = _mm256_sub_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(sums + 4 * r)), offset_v);
        _mm256_store_ps(scores + 4 * r, _mm256_mul_ps(_mm256_cvtepi32_ps(sum), factor_v));
      }
      StoreHeadMajor(scores, row_factor, count, std::min<size_t>(4, heads_ - 4 * hg), out + 4 * hg * out_stride,
                     out_stride);
    }
  }

  const RowSource& rows_;
  size_t n_;
  const ShuffleUnpacker& shuffle_;
  const ScoreQueries& queries_;
  size_t heads_;
  const RowFactor* factors_;
  // LiveChunks of the rows, and blocks of 16 in the padded row.
  size_t chunks_, blocks_;
  bool vnni_;
  uint8_t table_[32];  // the table plus its offset in both 128-bit blocks
};

// The weighted sums with byte products: the weights of four rows (unsigned bytes: a softmax's
// weights times norms are not negative) against the four rows' levels (signed bytes) at one
// coordinate, interleaved into a dword, so that ByteDot sums all four products exactly (a pair is at
// most 2 * 127 * 127 in magnitude) where PairAccumulator takes 16-bit products of two rows, their
// levels widened first. A block with negative
// weights adds the sums of their magnitudes with the opposite sign, so that the sums stay the
// reference's.
//
// Lane order: a chunk of 32 coordinates makes four vectors of interleaved quads; vector m holds
// coordinates 4m .. 4m + 3 in its low 128 bits and 16 + 4m .. 16 + 4m + 3 in its high.
KernelVector<uint32_t> QuadByteLaneCoordinates(size_t padded) {
  KernelVector<uint32_t> coordinate(padded);
  for (size_t lane = 0; lane < padded; ++lane) {
    const size_t chunk = lane / 32, m = lane % 32 / 8, e = lane % 8;
    coordinate[lane] = static_cast<uint32_t>(32 * chunk + 4 * m + e % 4 + 16 * (e / 4));
  }
  return coordinate;
}

class QuadByteAccumulator {
 public:
  QuadByteAccumulator(const RowSource& rows, size_t n, const Unpacker& unpacker, const ByteTable& table,
                      size_t heads, const RowFactor* factors, BlockWeights& block)
      : rows_(rows), n_(n), heads_(heads), unpacker_(unpacker), factors_(factors),
        block_(block), quads_(kernel_array<uint8_t>(kIntBlockRows * 32)),
        positive_(heads * kIntBlockRows), negative_(heads * kIntBlockRows), vnni_(ShuffleVnniUsable()),
        full_(unpacker.shuffle().full_rows()) {
    TableBytes(table, 0, table_);
  }

  // The same rows' next segment (RowSegments): the RowSource this reads has moved to it.
  void NextSegment(size_t n) {
    n_ = n;
  }

  // Rows [start, start + min(kIntBlockRows, n - start)) with weights weights[h * weight_stride + i]
  // for row start + i, added to head h's lanes at lanes.Head(h).
  void Block(const float* weights, size_t weight_stride, size_t start, LaneAccumulators& lanes) {
    const size_t count = std::min(kIntBlockRows, n_ - start), live = LiveChunks(rows_.dim) * 32;
    HWY_ALIGN float row_factor[kIntBlockRows];
    LoadFactors(rows_, factors_, start, count, row_factor);
    bool any_negative = false;
    block_.Round(weights, heads_, weight_stride, 0, count, row_factor, [&](size_t h, const VI32* rounded) {
      any_negative |= WeightBytes(rounded, positive_.data() + h * kIntBlockRows, negative_.data() + h * kIntBlockRows);
    });
    const ShuffleUnpacker::Constants constants = unpacker_.shuffle().constants();
    const uint8_t* first = rows_.data + start * rows_.stride;
    const __m256i table = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(table_));
    const size_t quads = (count + 3) / 4;
    for (size_t c = 0; c < live; c += 32) {
      const size_t part = (kIntBlockRows * 32 + live - 1) / live;  // of the next block, per chunk
      FetchRows(rows_, start + kIntBlockRows + c / 32 * part, part, n_);
      if (full_) {
        Interleave<true>(constants, first, count, c / 32, quads, table);
      } else {
        Interleave<false>(constants, first, count, c / 32, quads, table);
      }
      for (size_t h = 0; h < heads_; h += 4) {
        const size_t group = std::min<size_t>(4, heads_ - h);
        for (size_t half = 0; half < 2; ++half) {
          __m256i sums[4][2];
          if (vnni_) {
            SumsOf<true>(group, half, quads, h, any_negative, sums);
          } else {
            SumsOf<false>(group, half, quads, h, any_negative, sums);
          }
          for (size_t g = 0; g < group; ++g) {
            if (!block_.live[h + g]) continue;
            const __m256 scale = _mm256_set1_ps(block_.scale[h + g]);
            for (size_t k = 0; k < 2; ++k) {
              float* target = lanes.Head(h + g) + c + 8 * (2 * half + k);
              const __m256 exact = _mm256_cvtepi32_ps(sums[g][k]);
              _mm256_storeu_ps(target, _mm256_add_ps(_mm256_loadu_ps(target), _mm256_mul_ps(exact, scale)));
            }
          }
        }
      }
    }
  }

 private:
  // A head's rounded weights (within +-kWeightLargest) as bytes: the positive ones to positive and
  // the magnitudes of the negative ones to negative, zero elsewhere; whether any was negative. Packed
  // eight vectors at a time (packssdw, then packuswb, which also zeroes the other sign, then one
  // vpermd for the order): a demotion per vector and sign was a fifth of AVX2's weighted sum.
  static HWY_INLINE bool WeightBytes(const VI32* rounded, uint8_t* positive, uint8_t* negative) {
#if HWY_TARGET != HWY_AVX2  // AVX3's 512-bit vectors: a demotion each
    const DI32 di32;
    const hn::Rebind<uint8_t, DI32> du8;
    const auto zero = hn::Zero(di32);
    bool any_negative = false;
    for (size_t v = 0; v < BlockWeights::kVectors; ++v) {
      any_negative |= !hn::AllFalse(di32, hn::Lt(rounded[v], zero));
      hn::StoreU(hn::DemoteTo(du8, hn::Max(rounded[v], zero)), du8, positive + v * hn::Lanes(di32));
      hn::StoreU(hn::DemoteTo(du8, hn::Max(hn::Neg(rounded[v]), zero)), du8, negative + v * hn::Lanes(di32));
    }
    return any_negative;
#else
    static_assert(BlockWeights::kVectors == 8 && kIntBlockRows == 64);
    // packuswb of two packssdw of vectors a..d leaves, per 128-bit block, dwords of a, b, c, d.
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7), zero = _mm256_setzero_si256();
    __m256i words[4];
    for (int i = 0; i < 4; ++i) words[i] = _mm256_packs_epi32(rounded[2 * i].raw, rounded[2 * i + 1].raw);
    const auto store = [&](uint8_t* out, const __m256i* w) HWY_ATTR __attribute__((always_inline)) {
      for (int i = 0; i < 2; ++i)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 * i),
                            _mm256_permutevar8x32_epi32(_mm256_packus_epi16(w[2 * i], w[2 * i + 1]), order));
    };
    store(positive, words);
    // A negative word has its high byte's top bit set; a positive one (below 128) none of its bytes'.
    const __m256i any = _mm256_or_si256(_mm256_or_si256(words[0], words[1]), _mm256_or_si256(words[2], words[3]));
    if (HWY_LIKELY(_mm256_movemask_epi8(any) == 0)) {
      std::memset(negative, 0, kIntBlockRows);
      return false;
    }
    __m256i negated[4];
    for (int i = 0; i < 4; ++i) negated[i] = _mm256_sub_epi16(zero, words[i]);
    store(negative, negated);
    return true;
#endif
  }

  // Chunk k of the block's rows (from `first`, count of them) unpacked, looked up and interleaved by
  // quads into quads_: quad q's vector m at quads_ + (4 q + m) * 32. Rows past count repeat the
  // last (their weights are zero).
  template <bool kFull>
  HWY_INLINE void Interleave(const ShuffleUnpacker::Constants& constants, const uint8_t* first, size_t count,
                             size_t k, size_t quads, __m256i table) {
    const size_t stride = rows_.stride;
    if constexpr (kFull) {
      // Rows 4q and 4q + 1 (4q + 2 and 4q + 3) interleaved by bytes in 16-bit words (Words), then
      // looked up: 4 shuffles fewer per quad than looking up each row and interleaving its bytes.
      using V16 = hn::Vec<ShuffleUnpacker::D16>;
      for (size_t q = 0; q < quads; ++q) {
        const auto row = [&](size_t r) { return first + std::min(4 * q + r, count - 1) * stride; };
        V16 a0, a1, b0, b1, c0, c1, d0, d1;
        ShuffleUnpacker::Words<false>(constants, row(0), k, a0, a1);
        ShuffleUnpacker::Words<true>(constants, row(1), k, b0, b1);
        ShuffleUnpacker::Words<false>(constants, row(2), k, c0, c1);
        ShuffleUnpacker::Words<true>(constants, row(3), k, d0, d1);
        const __m256i low01 = _mm256_shuffle_epi8(table, hn::Or(a0, b0).raw);
        const __m256i high01 = _mm256_shuffle_epi8(table, hn::Or(a1, b1).raw);
        const __m256i low23 = _mm256_shuffle_epi8(table, hn::Or(c0, d0).raw);
        const __m256i high23 = _mm256_shuffle_epi8(table, hn::Or(c1, d1).raw);
        __m256i* out = reinterpret_cast<__m256i*>(quads_.get() + 4 * q * 32);
        _mm256_store_si256(out, _mm256_unpacklo_epi16(low01, low23));
        _mm256_store_si256(out + 1, _mm256_unpackhi_epi16(low01, low23));
        _mm256_store_si256(out + 2, _mm256_unpacklo_epi16(high01, high23));
        _mm256_store_si256(out + 3, _mm256_unpackhi_epi16(high01, high23));
      }
      return;
    }
    for (size_t q = 0; q < quads; ++q) {
      const auto level = [&](size_t r) HWY_ATTR __attribute__((always_inline)) {
        const uint8_t* row = first + std::min(4 * q + r, count - 1) * stride;
        return _mm256_shuffle_epi8(table, ShuffleUnpacker::Chunk<kFull>(constants, row, k).raw);
      };
      const __m256i l0 = level(0), l1 = level(1), l2 = level(2), l3 = level(3);
      const __m256i low01 = _mm256_unpacklo_epi8(l0, l1), high01 = _mm256_unpackhi_epi8(l0, l1);
      const __m256i low23 = _mm256_unpacklo_epi8(l2, l3), high23 = _mm256_unpackhi_epi8(l2, l3);
      __m256i* out = reinterpret_cast<__m256i*>(quads_.get() + 4 * q * 32);
      _mm256_store_si256(out, _mm256_unpacklo_epi16(low01, low23));
      _mm256_store_si256(out + 1, _mm256_unpackhi_epi16(low01, low23));
      _mm256_store_si256(out + 2, _mm256_unpacklo_epi16(high01, high23));
      _mm256_store_si256(out + 3, _mm256_unpackhi_epi16(high01, high23));
    }
  }

  // Heads [first, first + group), vectors 2 half and 2 half + 1 of every quad: sums[g][k].
  template <bool kVnni>
  HWY_INLINE void SumsOf(size_t group, size_t half, size_t quads, size_t first, bool any_negative,
                         __m256i (*sums)[2]) const {
    switch (group) {
      case 4: return Sums<4, kVnni>(half, quads, first, any_negative, sums);
      case 3: return Sums<3, kVnni>(half, quads, first, any_negative, sums);
      case 2: return Sums<2, kVnni>(half, quads, first, any_negative, sums);
      default: return Sums<1, kVnni>(half, quads, first, any_negative, sums);
    }
  }

  template <int kHeads, bool kVnni>
  HWY_INLINE void Sums(size_t half, size_t quads, size_t first, bool any_negative, __m256i (*sums)[2]) const {
    QuadSums<kHeads, kVnni>(half, quads, positive_.data() + first * kIntBlockRows, sums, false);
    if (any_negative) QuadSums<kHeads, kVnni>(half, quads, negative_.data() + first * kIntBlockRows, sums, true);
  }

  template <int kHeads, bool kVnni>
  HWY_INLINE void QuadSums(size_t half, size_t quads, const uint8_t* weight_bytes, __m256i (*sums)[2],
                           bool subtract) const {
    __m256i acc[kHeads][2];
    for (int g = 0; g < kHeads; ++g) acc[g][0] = acc[g][1] = _mm256_setzero_si256();
    const __m256i* vectors = reinterpret_cast<const __m256i*>(quads_.get()) + 2 * half;
    for (size_t q = 0; q < quads; ++q) {
      const __m256i a = _mm256_load_si256(vectors + 4 * q), b = _mm256_load_si256(vectors + 4 * q + 1);
      for (int g = 0; g < kHeads; ++g) {
        int32_t quad;  // the weights of rows 4q..4q+3, the first in the low byte
        std::memcpy(&quad, weight_bytes + g * kIntBlockRows + 4 * q, sizeof(quad));
        const __m256i w = _mm256_set1_epi32(quad);
        acc[g][0] = ByteDot<kVnni>(acc[g][0], w, a);
        acc[g][1] = ByteDot<kVnni>(acc[g][1], w, b);
      }
    }
    for (int g = 0; g < kHeads; ++g)
      for (int k = 0; k < 2; ++k)
        sums[g][k] = subtract ? _mm256_sub_epi32(sums[g][k], acc[g][k]) : acc[g][k];
  }

  const RowSource& rows_;
  size_t n_, heads_;
  const Unpacker& unpacker_;
  const RowFactor* factors_;
  BlockWeights& block_;
  uint8_t table_[32];  // the levels in both 128-bit blocks
  KernelArray<uint8_t> quads_;  // the chunk's quads, interleaved
  KernelVector<uint8_t> positive_, negative_;  // per head, the block's weights' magnitudes by sign
  bool vnni_;
  bool full_;  // ShuffleUnpacker::full_rows(): unpacked without testing their form
};

#endif  // KVSKETCH_INT_INDEX_X86 && (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3)

}  // namespace HWY_NAMESPACE
}  // namespace kvsketch::simd
KVSKETCH_INT_INDEX_END();

#endif  // KVSKETCH_SIMD_INT_INDEX_AVX2_INL_H_
