// The integer attention kernels on AMX tiles, target AVX3_DL only (a Highway -inl module; it
// builds on the Unpacker, FieldTable, BlockWeights, LoadFactors and FetchRows of the modules it
// includes).
//
// Rows are unpacked and looked up with AVX-512 (Unpacker::LookupRows, vpermb over the byte table) into
// small buffers, and the matrix unit does the multiplies: one TDPBUSD is 16 x 64 by 64 x 16 bytes,
// 16 times a 512-bit vpdpbusd, and runs beside the vector ports, which are left with the unpacking
// alone. Every product and sum is the same integer as in the VNNI kernels, so the results are the
// same bits (the kernel tests compare both with the scalar definition).
//
// Tile registers are named by immediates, so the tile numbers below are literals.
#if defined(KVSKETCH_SIMD_INT_INDEX_AMX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVSKETCH_SIMD_INT_INDEX_AMX_INL_H_
#undef KVSKETCH_SIMD_INT_INDEX_AMX_INL_H_
#else
#define KVSKETCH_SIMD_INT_INDEX_AMX_INL_H_
#endif

#include <hwy/aligned_allocator.h>

#include "simd/amx.hpp"
#include "simd/int_index_quads-inl.h"

KVSKETCH_INT_INDEX_BEGIN();
namespace kvsketch::simd {
namespace HWY_NAMESPACE {

#if KVSKETCH_INT_INDEX_X86 && HWY_TARGET == HWY_AVX3_DL

// Configures this thread's tiles for a kernel and returns them to the initial state after it, so
// that the OS need not save 8 KB of tile data at every switch.
class TileScope {
 public:
  explicit TileScope(const TileConfig& config) { _tile_loadconfig(&config); }
  ~TileScope() { _tile_release(); }
  TileScope(const TileScope&) = delete;
  TileScope& operator=(const TileScope&) = delete;
};

constexpr size_t kTileRows = 16;         // rows of a tile, and int32 columns of an accumulator tile
constexpr size_t kAmxWeightedHeads = 7;  // 2 * heads + 1 rows of A

// A zeroed buffer on cache-line boundaries, so that tile rows do not straddle lines.
template <typename T>
hwy::AlignedFreeUniquePtr<T[]> ZeroedTileBuffer(size_t n) {
  auto buffer = hwy::AllocateAligned<T>(n);
  std::memset(buffer.get(), 0, n * sizeof(T));
  return buffer;
}

// The 16 rows x 4 heads of int32 sums that a score tile stores (row r at 4r) as one vector per
// head, by two rounds of two-source permutes: far cheaper than a gather per head.
class HeadColumns {
 public:
  HeadColumns() {
    HWY_ALIGN int32_t pair[2][16], half[2][16];
    for (int lane = 0; lane < 16; ++lane) {
      // Round 1 over 8 rows (two vectors): lanes 0-7 head 2p, lanes 8-15 head 2p + 1.
      for (int p = 0; p < 2; ++p) pair[p][lane] = 4 * (lane % 8) + 2 * p + lane / 8;
      // Round 2: rows 0-7 from the first source and rows 8-15 from the second, low or high half.
      for (int p = 0; p < 2; ++p) half[p][lane] = 8 * p + lane % 8 + 16 * (lane / 8);
    }
    for (int p = 0; p < 2; ++p) {
      pair_[p] = _mm512_load_si512(pair[p]);
      half_[p] = _mm512_load_si512(half[p]);
    }
  }

  void Four(const int32_t* sums, __m512i* heads) const {
    const __m512i v0 = _mm512_load_si512(sums), v1 = _mm512_load_si512(sums + 16);
    const __m512i v2 = _mm512_load_si512(sums + 32), v3 = _mm512_load_si512(sums + 48);
    for (int p = 0; p < 2; ++p) {
      const __m512i top = _mm512_permutex2var_epi32(v0, pair_[p], v1);     // rows 0-7 of heads 2p, 2p + 1
      const __m512i bottom = _mm512_permutex2var_epi32(v2, pair_[p], v3);  // rows 8-15
      heads[2 * p] = _mm512_permutex2var_epi32(top, half_[0], bottom);
      heads[2 * p + 1] = _mm512_permutex2var_epi32(top, half_[1], bottom);
    }
  }

 private:
  __m512i pair_[2], half_[2];
};

// Scores, for up to 16 heads. Rows go 16 at a time (a slab): their levels plus the offset (unsigned) into
// a 16 x padded byte buffer. A: the slab's 64 coordinates of a chunk. B: the query bytes of the
// heads for the same coordinates, row r holding coordinates 4r..4r+3 of every head (prepared once).
// C: 16 rows x heads sums, from which offset * sum(q) comes off as in the VNNI kernel.
//
// The matrix unit runs beside the vector ports, but it wakes up slowly (hundreds of cycles) when
// left idle for longer than that, a tile load waits for the vector stores that wrote its bytes, and
// tile registers are not renamed. So the work is a pipeline over slabs: while slab s is unpacked,
// slab s - 1 is multiplied (the slabs alternate between two sets of tiles), slab s - 2's sums are
// stored, and a block's scores are written a slab after its last sums.
void AmxScores(const RowSource& rows, size_t n, const Unpacker& unpacker, __m512i field_table, const int8_t* head_bytes,
               size_t heads, size_t padded, const float* head_factors, const int32_t* offsets, const RowFactor* factors,
               float* out, size_t out_stride) {
  const size_t chunks = padded / 64, b_bytes = kTileRows * 4 * heads, b_stride = 4 * heads;
  const size_t c_stride = heads * sizeof(int32_t), slabs = (n + kTileRows - 1) / kTileRows;
  constexpr size_t kSlabsPerBlock = kIntBlockRows / kTileRows;
  // B per chunk: b[r][4h + t] = byte 64k + 4r + t of head h.
  auto b = ZeroedTileBuffer<int8_t>(chunks * b_bytes);
  for (size_t h = 0; h < heads; ++h)
    for (size_t j = 0; j < padded; ++j)
      b[j / 64 * b_bytes + j % 64 / 4 * b_stride + 4 * h + j % 4] = head_bytes[h * padded + j];
  auto levels = ZeroedTileBuffer<uint8_t>(2 * kTileRows * padded);   // slabs s % 2
  auto sums = ZeroedTileBuffer<int32_t>(2 * kIntBlockRows * heads);  // blocks i % 2: row r at r * heads
  struct Block {
    size_t start = 0, count = 0;
  };
  Block blocks[2];
  // Tiles: C = slab parity p (0, 1); A = 2 + 2p + (chunk parity); B = 6 + (chunk parity), loaded
  // once when there are at most two chunks.
  TileConfig config;
  for (int tile = 0; tile < 2; ++tile) config.Set(tile, kTileRows, c_stride);
  for (int tile = 2; tile < 6; ++tile) config.Set(tile, kTileRows, 64);
  for (int tile = 6; tile < 8; ++tile) config.Set(tile, kTileRows, b_stride);
  const TileScope scope(config);
  const bool resident = chunks <= 2;
  if (resident) {
    _tile_loadd(6, b.get(), b_stride);
    if (chunks == 2) _tile_loadd(7, b.get() + b_bytes, b_stride);
  }

  const auto unpack = [&](size_t slab) KVSKETCH_KERNEL_ATTR {
    const size_t first = slab * kTileRows;
    if (slab % kSlabsPerBlock == 0) {
      Block& block = blocks[slab / kSlabsPerBlock % 2];
      block.start = first;
      block.count = std::min(kIntBlockRows, n - first);
    }
    unpacker.LookupRows(rows.data + first * rows.stride, rows.stride, std::min(kTileRows, n - first), field_table,
                        kIntBlockRows, levels.get() + slab % 2 * kTileRows * padded, padded);
  };
  // A slab's products into tile C, its chunks alternating between A tiles A0 and A1 (and B tiles 6
  // and 7). A macro because tile numbers are immediates.
#define KVSKETCH_SLAB_PRODUCTS(C, A0, A1)                             \
  _tile_zero(C);                                                      \
  for (size_t k = 0; k < chunks; ++k) {                               \
    if (k % 2 == 0) {                                                 \
      if (!resident) _tile_loadd(6, b.get() + k * b_bytes, b_stride); \
      _tile_loadd(A0, a + 64 * k, padded);                            \
      _tile_dpbusd(C, A0, 6);                                         \
    } else {                                                          \
      if (!resident) _tile_loadd(7, b.get() + k * b_bytes, b_stride); \
      _tile_loadd(A1, a + 64 * k, padded);                            \
      _tile_dpbusd(C, A1, 7);                                         \
    }                                                                 \
  }
  const auto multiply = [&](size_t slab) KVSKETCH_KERNEL_ATTR {
    const uint8_t* a = levels.get() + slab % 2 * kTileRows * padded;
    if (slab % 2 == 0) {
      KVSKETCH_SLAB_PRODUCTS(0, 2, 3)
    } else {
      KVSKETCH_SLAB_PRODUCTS(1, 4, 5)
    }
  };
#undef KVSKETCH_SLAB_PRODUCTS
  const auto store = [&](size_t slab) KVSKETCH_KERNEL_ATTR {
    int32_t* c = sums.get() + (slab / kSlabsPerBlock % 2 * kIntBlockRows + slab % kSlabsPerBlock * kTileRows) * heads;
    if (slab % 2 == 0) {
      _tile_stored(0, c, c_stride);
    } else {
      _tile_stored(1, c, c_stride);
    }
  };
  // Each head's column, 16 rows at a time, with the float operations of the VNNI kernel: (sum -
  // offset) * head factor * row factor.
  const __m512i column = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                            _mm512_set1_epi32(static_cast<int>(heads)));
  const HeadColumns head_columns;
  const auto write_scores = [&](size_t index) KVSKETCH_KERNEL_ATTR {
    const Block& block = blocks[index % 2];
    const int32_t* block_sums = sums.get() + index % 2 * kIntBlockRows * heads;
    // The rows' factors now, when unpacking has brought their lines in: read at the block's start
    // they were the first touch of the rows and waited on memory.
    HWY_ALIGN float row_factors[kIntBlockRows];
    LoadFactors(rows, factors, block.start, block.count, row_factors);
    for (size_t r = 0; r < block.count; r += kTileRows) {
      const __mmask16 live = static_cast<__mmask16>((1u << std::min(kTileRows, block.count - r)) - 1);
      const __m512 row_factor = _mm512_load_ps(row_factors + r);
      __m512i four[4];
      if (heads == 4) head_columns.Four(block_sums + r * heads, four);
      for (size_t h = 0; h < heads; ++h) {
        const __m512i sum = heads == 4 ? four[h] : _mm512_i32gather_epi32(column, block_sums + r * heads + h, 4);
        const __m512 score = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(sum, _mm512_set1_epi32(offsets[h]))),
                                           _mm512_set1_ps(head_factors[h]));
        _mm512_mask_storeu_ps(out + h * out_stride + block.start + r, live, _mm512_mul_ps(score, row_factor));
      }
    }
  };
  for (size_t s = 0; s < slabs + 3; ++s) {
    if (s < slabs) unpack(s);
    if (s >= 1 && s - 1 < slabs) multiply(s - 1);
    if (s >= 2 && s - 2 < slabs) store(s - 2);
    const size_t last = s - 3;  // a slab whose sums were stored one step ago
    if (s >= 3 && last < slabs && (last % kSlabsPerBlock == kSlabsPerBlock - 1 || last == slabs - 1))
      write_scores(last / kSlabsPerBlock);
  }
}

// Weighted sum, for up to 7 heads. A block's weight words w = 256 hi + lo are written as signed
// bytes hi and lo - 128, so that one signed product sums both halves: A holds, over the block's 64
// rows, a row of hi bytes and a row of lo - 128 bytes per head and a row of ones, and sum(w v) =
// 256 sum(hi v) + sum((lo - 128) v) + 128 sum(v), exactly the VNNI kernel's sums. (The weights
// are bytes, so hi is 0 or -1; the split takes any word, and a smaller A was never measured
// against it on a CPU with AMX.) B: for 16
// coordinates, row q holds the levels of rows 4q..4q+3 at each coordinate (the VNNI order), made
// by QuadLookup straight from the four rows' codes; four B tiles (m = 0..3) cover a
// 64-coordinate chunk, each with its own C.
//
// As in AmxScores, the work is a pipeline, here over steps (a block's chunk): while step t's B
// tiles are built, step t - 1 is multiplied and stored, and step t - 2's sums are added up.
void AmxWeightedSum(const RowSource& rows, size_t n, const Unpacker& unpacker, __m512i field_table,
                    const float* weights, size_t heads, size_t weight_stride, size_t padded, float* acc,
                    size_t acc_stride, const RowFactor* factors, BlockWeights& block) {
  const size_t chunks = padded / 64, a_rows = 2 * heads + 1;
  const size_t blocks = (n + kIntBlockRows - 1) / kIntBlockRows, steps = blocks * chunks;
  LaneAccumulators lane_acc(acc, heads, acc_stride, rows.dim, QuadLaneCoordinates(padded));
  constexpr size_t kTileBytes = kTileRows * 64;
  auto a = ZeroedTileBuffer<int8_t>(2 * kTileBytes);                     // blocks i % 2
  auto values = ZeroedTileBuffer<int8_t>(2 * 4 * kTileBytes);            // steps t % 2, four B tiles each
  auto sums = ZeroedTileBuffer<int32_t>(2 * 4 * kTileRows * kTileRows);  // steps t % 2, four C tiles each
  KernelVector<float> block_scale(4 * heads);                             // blocks i % 4
  KernelVector<uint8_t> block_live(4 * heads);
  for (size_t ring = 0; ring < 2; ++ring) std::memset(a.get() + ring * kTileBytes + 2 * heads * 64, 1, 64);
  TileConfig config;
  config.Set(0, a_rows, 64);                                             // A
  for (int tile = 1; tile < 3; ++tile) config.Set(tile, kTileRows, 64);  // B, m parity
  for (int tile = 4; tile < 8; ++tile) config.Set(tile, a_rows, 64);     // C per m
  const TileScope scope(config);
  // Byte indices of the high and the low bytes of 64 words in two vectors.
  HWY_ALIGN uint8_t odd_bytes[64], even_bytes[64];
  for (int e = 0; e < 64; ++e) {
    odd_bytes[e] = static_cast<uint8_t>(2 * e + 1);
    even_bytes[e] = static_cast<uint8_t>(2 * e);
  }
  const __m512i odd = _mm512_load_si512(odd_bytes), even = _mm512_load_si512(even_bytes);
  const size_t part = (kIntBlockRows * 64 + padded - 1) / padded;  // rows of the next block to ask for, per chunk
  HWY_ALIGN uint8_t table_bytes[64];
  _mm512_store_si512(table_bytes, field_table);
  KernelVector<QuadLookup> lookups;
  for (size_t k = 0; k < chunks; ++k) lookups.emplace_back(unpacker, k, table_bytes);
  const uint8_t* end = CodesEnd(rows, n);

  // Quads [quad, quad + 8) of step's B tiles (quad 0: with the block's weights first).
  const auto build = [&](size_t step, size_t quad) KVSKETCH_KERNEL_ATTR {
    const size_t index = step / chunks, k = step % chunks, start = index * kIntBlockRows;
    const size_t count = std::min(kIntBlockRows, n - start);
    if (k == 0 && quad == 0) {
      HWY_ALIGN float row_factor[kIntBlockRows];
      LoadFactors(rows, factors, start, count, row_factor);
      block.Round(weights, heads, weight_stride, start, count, row_factor);
      int8_t* rows_a = a.get() + index % 2 * kTileBytes;
      for (size_t h = 0; h < heads; ++h) {
        const __m512i w0 = _mm512_loadu_si512(block.words.data() + h * kIntBlockRows);
        const __m512i w1 = _mm512_loadu_si512(block.words.data() + h * kIntBlockRows + 32);
        _mm512_store_si512(rows_a + h * 64, _mm512_permutex2var_epi8(w0, odd, w1));
        _mm512_store_si512(rows_a + (heads + h) * 64,
                           _mm512_xor_si512(_mm512_permutex2var_epi8(w0, even, w1), _mm512_set1_epi8(-128)));
        block_scale[index % 4 * heads + h] = block.scale[h];
        block_live[index % 4 * heads + h] = block.live[h];
      }
    }
    FetchRows(rows, start + kIntBlockRows + k * part + quad / 8 * part / 2, part / 2 + 1, n);
    const uint8_t* first = rows.data + start * rows.stride;
    const size_t stride = rows.stride;
    int8_t* b = values.get() + step % 2 * 4 * kTileBytes;
    for (size_t q = quad; q < quad + 8; ++q) {
      __m512i v[4];
      const uint8_t* row = first + 4 * q * stride;
      if (4 * q + 3 < count) {
        lookups[k](row, row + stride, row + 2 * stride, row + 3 * stride, end, v);
      } else {  // rows past count repeat the last (their weights are zero)
        const auto at = [&](size_t t) KVSKETCH_KERNEL_ATTR { return first + std::min(4 * q + t, count - 1) * stride; };
        lookups[k](at(0), at(1), at(2), at(3), end, v);
      }
      for (size_t m = 0; m < 4; ++m) _mm512_store_si512(b + q * 64 + m * kTileBytes, v[m]);
    }
  };
  // B tiles m = 0, 1 (half 0) or m = 2, 3 and the stores (half 1) of step's products.
  const auto multiply = [&](size_t step, size_t half) KVSKETCH_KERNEL_ATTR {
    const int8_t* b = values.get() + step % 2 * 4 * kTileBytes;
    int32_t* c = sums.get() + step % 2 * 4 * kTileRows * kTileRows;
    if (half == 0) {
      _tile_loadd(0, a.get() + step / chunks % 2 * kTileBytes, 64);
      _tile_zero(4);
      _tile_zero(5);
      _tile_loadd(1, b, 64);
      _tile_dpbssd(4, 0, 1);
      _tile_loadd(2, b + kTileBytes, 64);
      _tile_dpbssd(5, 0, 2);
      return;
    }
    _tile_zero(6);
    _tile_zero(7);
    _tile_loadd(1, b + 2 * kTileBytes, 64);
    _tile_dpbssd(6, 0, 1);
    _tile_loadd(2, b + 3 * kTileBytes, 64);
    _tile_dpbssd(7, 0, 2);
    _tile_stored(4, c, 64);
    _tile_stored(5, c + kTileRows * kTileRows, 64);
    _tile_stored(6, c + 2 * kTileRows * kTileRows, 64);
    _tile_stored(7, c + 3 * kTileRows * kTileRows, 64);
  };
  const auto add_up = [&](size_t step) KVSKETCH_KERNEL_ATTR {
    const size_t index = step / chunks, k = step % chunks;
    const int32_t* c = sums.get() + step % 2 * 4 * kTileRows * kTileRows;
    for (size_t h = 0; h < heads; ++h) {
      if (!block_live[index % 4 * heads + h]) continue;
      const __m512 scale = _mm512_set1_ps(block_scale[index % 4 * heads + h]);
      for (size_t m = 0; m < 4; ++m) {
        const int32_t* tile = c + m * kTileRows * kTileRows;
        const __m512i high = _mm512_load_si512(tile + h * kTileRows);
        const __m512i low = _mm512_load_si512(tile + (heads + h) * kTileRows);
        const __m512i ones = _mm512_load_si512(tile + 2 * heads * kTileRows);
        const __m512i exact =
            _mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(high, 8), low), _mm512_slli_epi32(ones, 7));
        float* target = lane_acc.Head(h) + 64 * k + 16 * m;
        _mm512_storeu_ps(target,
                         _mm512_add_ps(_mm512_loadu_ps(target), _mm512_mul_ps(_mm512_cvtepi32_ps(exact), scale)));
      }
    }
  };
  // Halves of building and multiplying alternate, so that the matrix unit is never idle long.
  for (size_t t = 0; t < steps + 2; ++t) {
    for (size_t half = 0; half < 2; ++half) {
      if (t < steps) build(t, 8 * half);
      if (t >= 1 && t - 1 < steps) multiply(t - 1, half);
    }
    if (t >= 2) add_up(t - 2);
  }
  lane_acc.WriteBack(acc);
}

#endif  // KVSKETCH_INT_INDEX_X86 && HWY_TARGET == HWY_AVX3_DL

}  // namespace HWY_NAMESPACE
}  // namespace kvsketch::simd
KVSKETCH_INT_INDEX_END();

#endif  // KVSKETCH_SIMD_INT_INDEX_AMX_INL_H_
