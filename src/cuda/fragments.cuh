// The register fragments of the decode kernel, as functions of a thread's place in the warp
// (thread = 4 g + c): what it loads of a 16-token tile, how it turns codes into fp16 operands of
// mma.m16n8k16 (byte-permute look-ups in the codebook), and which query head, token and
// coordinate each of its values belongs to. Host-callable too, so that a test can run a warp's 32
// threads on the CPU through an emulated mma and compare with plain arithmetic.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "cuda/kernels.hpp"

namespace kvsketch::cuda::detail {

constexpr int kTile = 16;
constexpr int kHalfBits = 16;  // the fp16 body's "bits"

// Byte i of the result is byte selector[4i + 2 : 4i] of the 8 bytes {b, a} (CUDA's __byte_perm).
__host__ __device__ inline uint32_t byte_perm(uint32_t a, uint32_t b, uint32_t selector) {
#ifdef __CUDA_ARCH__
  return __byte_perm(a, b, selector);
#else
  const uint64_t bytes = (static_cast<uint64_t>(b) << 32) | a;
  uint32_t out = 0;
  for (int i = 0; i < 4; ++i) out |= static_cast<uint32_t>((bytes >> (8 * ((selector >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return out;
#endif
}

// The low 32 bits of {high, low} >> shift (shift < 32).
__host__ __device__ inline uint32_t funnel_shift_right(uint32_t low, uint32_t high, int shift) {
#ifdef __CUDA_ARCH__
  return __funnelshift_r(low, high, shift);
#else
  return static_cast<uint32_t>(((static_cast<uint64_t>(high) << 32) | low) >> shift);
#endif
}

// A load that streams past the caches (codes are read once per step).
template <typename T>
__host__ __device__ inline T load_streaming(const T* source) {
#ifdef __CUDA_ARCH__
  return __ldcs(source);
#else
  T value;
  std::memcpy(&value, source, sizeof(T));
  return value;
#endif
}

// Entry i (0..3) of a thread's score registers per half tile: token 2c + (i & 1) + 8 (i >> 1);
// the same four tokens give its value fragments and the norms it loads.
__host__ __device__ inline int score_token(int c, int i) { return 2 * c + (i & 1) + 8 * (i >> 1); }

__host__ __device__ inline uint32_t half2_bits(float low, float high) {
  const __half2 pair = __floats2half2_rn(low, high);
  uint32_t bits;
  memcpy(&bits, &pair, sizeof bits);
  return bits;
}

__host__ __device__ constexpr int gcd_of(int a, int b) { return b == 0 ? a : gcd_of(b, a % b); }

// BYTES bytes from `source`, known to be a multiple of ALIGN bytes (16 at most), into N words with
// the widest loads that alignment allows.
template <int BYTES, int ALIGN, int N>
__host__ __device__ inline void load_bytes(const uint8_t* source, uint32_t* words) {
  if constexpr (ALIGN % 16 == 0) {
#pragma unroll
    for (int i = 0; i < BYTES / 16; ++i) {
      const uint4 v = load_streaming(reinterpret_cast<const uint4*>(source) + i);
      words[4 * i] = v.x, words[4 * i + 1] = v.y, words[4 * i + 2] = v.z, words[4 * i + 3] = v.w;
    }
  } else if constexpr (ALIGN % 8 == 0) {
#pragma unroll
    for (int i = 0; i < BYTES / 8; ++i) {
      const uint2 v = load_streaming(reinterpret_cast<const uint2*>(source) + i);
      words[2 * i] = v.x, words[2 * i + 1] = v.y;
    }
  } else if constexpr (ALIGN % 4 == 0) {
#pragma unroll
    for (int i = 0; i < BYTES / 4; ++i) words[i] = load_streaming(reinterpret_cast<const unsigned int*>(source) + i);
  } else if constexpr (ALIGN % 2 == 0) {
#pragma unroll
    for (int i = 0; i < N; ++i) words[i] = 0;
#pragma unroll
    for (int i = 0; i < BYTES / 2; ++i)
      words[i / 2] |= static_cast<uint32_t>(load_streaming(reinterpret_cast<const unsigned short*>(source) + i))
                      << (16 * (i % 2));
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) words[i] = 0;
#pragma unroll
    for (int i = 0; i < BYTES; ++i) words[i / 4] |= static_cast<uint32_t>(load_streaming(source + i)) << (8 * (i % 4));
  }
}

// Loads BYTES bytes (a chunk at a multiple of BYTES from a 16-byte aligned base) into words,
// with the widest access its alignment allows.
template <int BYTES>
__host__ __device__ inline void load_chunk(const uint8_t* source, uint32_t (&words)[(BYTES + 3) / 4]) {
  load_bytes<BYTES, gcd_of(BYTES, 16), (BYTES + 3) / 4>(source, words);
}

// 32 bits of a packed stream of n words from bit `offset` (a compile-time constant after
// unrolling).
__host__ __device__ inline uint32_t bits_of(const uint32_t* words, int n, int offset) {
  const int word = offset / 32, shift = offset % 32;
  const uint32_t high = word + 1 < n ? words[word + 1] : 0u;
  return shift == 0 ? words[word] : funnel_shift_right(words[word], high, shift);
}

// Four BITS-bit indices from bit 0 of v, one per nibble: a byte-permute selector.
template <int BITS>
__host__ __device__ inline uint32_t nibbles(uint32_t v) {
  if constexpr (BITS == 4) return v & 0xffffu;
  constexpr uint32_t mask = (1u << BITS) - 1u;
  return (v & mask) | ((v >> BITS) & mask) << 4 | ((v >> (2 * BITS)) & mask) << 8 | ((v >> (3 * BITS)) & mask) << 12;
}

// The centroids of four indices (a selector of four nibbles) as fp16 pairs (c0, c1), (c2, c3).
// b <= 3: the 2^b centroids' low and high bytes are each one 8-byte table of a byte permute. b = 4:
// the codebook is symmetric, so the top bit gives the sign and the other three, flipped where it
// is 0, index the eight magnitudes.
template <int BITS>
__host__ __device__ inline uint2 centroid_pairs(uint32_t selector, const CodebookView& codebook) {
  if constexpr (BITS <= 3) {
    const uint32_t low = byte_perm(codebook.low_bytes[0], codebook.low_bytes[1], selector);
    const uint32_t high = byte_perm(codebook.high_bytes[0], codebook.high_bytes[1], selector);
    return {byte_perm(low, high, 0x5140), byte_perm(low, high, 0x7362)};
  } else {
    const uint32_t negative = ((selector >> 3) & 0x1111u) ^ 0x1111u;
    const uint32_t magnitude = (selector & 0x7777u) ^ (negative * 7u);
    const uint32_t low = byte_perm(codebook.low_bytes[0], codebook.low_bytes[1], magnitude);
    const uint32_t high = byte_perm(codebook.high_bytes[0], codebook.high_bytes[1], magnitude);
    return {byte_perm(low, high, 0x5140) ^ ((negative & 0x1u) << 15) ^ ((negative & 0x10u) << 27),
            byte_perm(low, high, 0x7362) ^ ((negative & 0x100u) << 7) ^ ((negative & 0x1000u) << 19)};
  }
}


template <int D, int CODE>
struct Layout {
  static constexpr bool kSplit = CODE == kSplit25 || CODE == kSplit35;
  static constexpr int kParts = kSplit ? 2 : 1;
  static constexpr int kCount0 = kSplit ? D / 4 : D;
  static constexpr int kBits0 = CODE == kSplit25 ? 3 : CODE == kSplit35 ? 4 : CODE;
  static constexpr int kBits1 = CODE == kSplit25 ? 2 : CODE == kSplit35 ? 3 : 0;
  __host__ __device__ static constexpr int count(int p) { return p == 0 ? kCount0 : D - kCount0; }
  __host__ __device__ static constexpr int bits(int p) { return p == 0 ? kBits0 : kBits1; }
  __host__ __device__ static constexpr int first(int p) { return p == 0 ? 0 : kCount0; }  // its first coordinate
  __host__ __device__ static constexpr int first_bit(int p) { return p == 0 ? 0 : kCount0 * kBits0; }  // in a row
  static constexpr int kRowBytes = (kCount0 * kBits0 + (D - kCount0) * kBits1) / 8;
  // A thread's bits of a token: keys a quarter of each part's coordinates, values an eighth.
  __host__ __device__ static constexpr int key_bits(int p) { return count(p) / 4 * bits(p); }
  __host__ __device__ static constexpr int value_bits(int p) { return count(p) / 8 * bits(p); }
  __host__ __device__ static constexpr int words(int bit_count) { return bit_count > 0 ? (bit_count + 31) / 32 : 0; }
  // Where part p's words start in a thread's words of a token.
  __host__ __device__ static constexpr int key_word(int p) { return p == 0 ? 0 : words(key_bits(0)); }
  __host__ __device__ static constexpr int value_word(int p) { return p == 0 ? 0 : words(value_bits(0)); }
  static constexpr int kKeyWords = words(key_bits(0)) + (kSplit ? words(key_bits(1)) : 0);
  static constexpr int kValueWords = words(value_bits(0)) + (kSplit ? words(value_bits(1)) : 0);
  // The part of k-step s (of D / 16) and of value n-tile j (of D / 8), and their index in it.
  __host__ __device__ static constexpr int part_of_step(int s) { return 16 * s < kCount0 ? 0 : 1; }
  __host__ __device__ static constexpr int part_of_tile(int j) { return 8 * j < kCount0 ? 0 : 1; }
};

// BITS bits from bit `offset` of `source` into words (bit 0 at the offset), by bytes: for a
// thread's values of a split part, which start at a nibble.
template <int BITS, int N>
__host__ __device__ inline void load_bits(const uint8_t* source, int offset, uint32_t* words) {
  const uint8_t* first = source + offset / 8;
  const int shift = offset % 8, bytes = (shift + BITS + 7) / 8;
  constexpr int kMaxBytes = (BITS + 7) / 8 + 1;
  uint32_t raw[(kMaxBytes + 3) / 4 + 1] = {};
#pragma unroll
  for (int i = 0; i < kMaxBytes; ++i)
    if (i < bytes) raw[i / 4] |= static_cast<uint32_t>(load_streaming(first + i)) << (8 * (i % 4));
#pragma unroll
  for (int w = 0; w < N; ++w) words[w] = shift == 0 ? raw[w] : funnel_shift_right(raw[w], raw[w + 1], shift);
}

// A thread's BITS bits of a token's row from bit `offset`: with the widest loads its alignment
// allows when they start at a byte (ALIGN: the bytes the start is known a multiple of), by
// bytes otherwise.
template <int BITS, int ALIGN, int N>
__host__ __device__ inline void load_part(const uint8_t* row, int offset, uint32_t* words) {
  if constexpr (BITS % 8 == 0) {
    if (offset % 8 == 0) {  // always, when BITS and the part's first bit are whole bytes
      load_bytes<BITS / 8, gcd_of(gcd_of(ALIGN, BITS / 8), 16), N>(row + offset / 8, words);
      return;
    }
  }
  load_bits<BITS, N>(row, offset, words);
}

// What a thread of a warp reads of one 16-token tile (thread = 4 * g + c), part by part:
//   keys    tokens g and 8 + g: a quarter of each part's coordinates, [c n/4, (c + 1) n/4) of its
//           n (the B fragments of S^T); with SIGNS (tq_prod; QJL with KB = 0) the same
//           coordinates of the tokens' sign bits too
//   values  tokens 2c, 2c + 1, 2c + 8, 2c + 9: an eighth of each part's, [g n/8, (g + 1) n/8)
//   norms   of the same four tokens, one per part (their scores and weights), and tq_prod's gammas
template <int D, int KB, int VB, bool SIGNS = false>
struct Tile {
  using Keys = Layout<D, KB>;
  using Values = Layout<D, VB>;
  static constexpr int kSignBytes = D / 32;
  static constexpr int kKeyWords = Keys::kKeyWords > 0 ? Keys::kKeyWords : 1, kValueWords = Values::kValueWords;
  static constexpr int kSignWords = SIGNS ? (kSignBytes + 3) / 4 : 1;
  uint32_t keys[2][kKeyWords];
  uint32_t signs[2][kSignWords];
  uint32_t values[4][kValueWords];
  unsigned short key_norms[4], value_norms[4], gammas[4];
  unsigned short key_norms1[4], value_norms1[4];  // a split's second part

  static constexpr int kKeyRow = Keys::kRowBytes + (SIGNS ? D / 8 : 0), kValueRow = Values::kRowBytes;

  // Part P's quarter of a key row (thread c), and its eighth of a value row (thread g).
  template <int P>
  __host__ __device__ void load_keys(const uint8_t* row, int c, uint32_t* words) {
    constexpr int kBits = Keys::key_bits(P), kFirst = Keys::first_bit(P);
    load_part<kBits, gcd_of(kKeyRow, kFirst / 8), Keys::words(kBits)>(row, kFirst + c * kBits,
                                                                      words + Keys::key_word(P));
  }
  template <int P>
  __host__ __device__ void load_values(const uint8_t* row, int g, uint32_t* words) {
    constexpr int kBits = Values::value_bits(P), kFirst = Values::first_bit(P);
    load_part<kBits, gcd_of(kValueRow, kFirst / 8), Values::words(kBits)>(row, kFirst + g * kBits,
                                                                          words + Values::value_word(P));
  }

  // The tile's tokens [0, valid) start at plane `plane` (page, head, token) of the store; tokens
  // past `valid` read the last valid one (finite data that the mask then drops).
  __host__ __device__ void load(const BodyView& body, size_t plane, int valid, int g, int c) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int token = min(8 * i + g, valid - 1);
      const uint8_t* row = body.key_indices + (plane + token) * kKeyRow;
      if constexpr (KB > 0) load_keys<0>(row, c, keys[i]);
      if constexpr (Keys::kSplit) load_keys<1>(row, c, keys[i]);
      if constexpr (SIGNS) load_chunk<kSignBytes>(row + Keys::kRowBytes + c * kSignBytes, signs[i]);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int token = min(score_token(c, i), valid - 1);
      const uint8_t* row = body.value_indices + (plane + token) * kValueRow;
      load_values<0>(row, g, values[i]);
      if constexpr (Values::kSplit) load_values<1>(row, g, values[i]);
      const size_t at = plane + token;
      key_norms[i] = KB != kHalfBits ? load_streaming(body.key_norms + at * Keys::kParts) : 0;
      value_norms[i] = VB != kHalfBits ? load_streaming(body.value_norms + at * Values::kParts) : 0;
      key_norms1[i] = Keys::kSplit ? load_streaming(body.key_norms + at * Keys::kParts + 1) : 0;
      value_norms1[i] = Values::kSplit ? load_streaming(body.value_norms + at * Values::kParts + 1) : 0;
      gammas[i] = SIGNS && KB > 0 ? load_streaming(body.key_gammas + at) : 0;
    }
  }
};

__host__ __device__ inline float half_value(unsigned short bits) { return __half2float(__ushort_as_half(bits)); }

// A token's score from its parts' sums as the CPU codec forms it: tq_mse's norm * <q', c>,
// tq_prod's norm * (<q', c> + gamma * <s', signs>) and QJL's norm * <s', signs>, the sign scale
// being in the sketched query s'.
template <int KB, bool SIGNS>
__host__ __device__ inline float key_score(float scalar, float sign, unsigned short norm, unsigned short gamma) {
  if constexpr (KB == kHalfBits) {
    return scalar;
  } else if constexpr (KB == 0) {
    return sign * half_value(norm);
  } else if constexpr (SIGNS) {
    return (scalar + half_value(gamma) * sign) * half_value(norm);
  } else {
    return scalar * half_value(norm);
  }
}

// Indices 4i .. 4i + 3 of BITS bits (of a part's n words) as fp16 pairs (v0, v1), (v2, v3).
template <int BITS>
__host__ __device__ inline uint2 quad_at(const uint32_t* words, int n, int i, const CodebookView& codebook) {
  if constexpr (BITS == kHalfBits) {
    return {words[2 * i], words[2 * i + 1]};
  } else {
    return centroid_pairs<BITS>(nibbles<BITS>(bits_of(words, n, 4 * i * BITS)), codebook);
  }
}

// The score of a token from its parts' sums: key_score of the first part (with tq_prod's or QJL's
// signs), plus a split's second part times its own norm.
template <int KB, bool SIGNS>
__host__ __device__ inline float token_score(float scalar, float scalar1, float sign, unsigned short norm,
                                             unsigned short norm1, unsigned short gamma) {
  const float score = key_score<KB, SIGNS>(scalar, sign, norm, gamma);
  if constexpr (KB == kSplit25 || KB == kSplit35) return score + scalar1 * half_value(norm1);
  return score;
}

// The B fragments of keys for k-step s of the token of `words` (one part): coordinates c D/4 + 4s .. + 3.
template <int KB, int N>
__host__ __device__ inline uint2 key_fragment(const uint32_t (&words)[N], int s, const CodebookView& codebook) {
  return quad_at<KB>(words, N, s, codebook);
}

// Coordinates 4q .. 4q + 3 of a token's value chunk (one part) as fp16 pairs (v0, v1), (v2, v3).
template <int VB, int N>
__host__ __device__ inline uint2 value_quad(const uint32_t (&words)[N], int q, const CodebookView& codebook) {
  return quad_at<VB>(words, N, q, codebook);
}

// The coordinates the fragments stand for, in the parts' concatenated (rotated) domain. CODE is
// the layout's (any one-part code for one part).
// The first of thread c's four coordinates of k-step s: its quarter of the step's part.
template <int D, int CODE = 0>
__host__ __device__ inline int key_coordinate(int c, int s) {
  using L = Layout<D, CODE>;
  const int p = L::part_of_step(s);
  return L::first(p) + c * (L::count(p) / 4) + 4 * (s - L::first(p) / 16);
}

// The coordinate (rotated, of a value) of output register k of n-tile j.
template <int D, int CODE = 0>
__host__ __device__ inline int value_coordinate(int c, int k, int j) {
  using L = Layout<D, CODE>;
  const int p = L::part_of_tile(j);
  return L::first(p) + (2 * c + k % 2) * (L::count(p) / 8) + j - L::first(p) / 8;
}

// The A fragments of Q' (group x D floats, rows past `group` zero): rows g and g + 8, k-step s's
// coordinates key_coordinate(c, s) + (0, 1) and (2, 3).
template <int D, int CODE = 0>
__host__ __device__ inline void query_fragments(const float* rotated, int group, int g, int c, uint32_t (&query)[D / 16][4]) {
#pragma unroll
  for (int s = 0; s < D / 16; ++s) {
    const int p = key_coordinate<D, CODE>(c, s);
    const float* upper = rotated + g * D + p;
    const float* lower = rotated + (g + 8) * D + p;
    const bool has_upper = g < group, has_lower = g + 8 < group;
    query[s][0] = has_upper ? half2_bits(upper[0], upper[1]) : 0u;
    query[s][1] = has_lower ? half2_bits(lower[0], lower[1]) : 0u;
    query[s][2] = has_upper ? half2_bits(upper[2], upper[3]) : 0u;
    query[s][3] = has_lower ? half2_bits(lower[2], lower[3]) : 0u;
  }
}

// The A fragment of O += W V from the softmax weights p (the score tile's accumulator layout) times
// a part's value norms of the four tokens: rows g, g + 8; tokens (2c, 2c + 1), then + 8.
__host__ __device__ inline void weight_fragment(const float (&p)[2][4], const float (&norms)[4], uint32_t (&out)[4]) {
  out[0] = half2_bits(p[0][0] * norms[0], p[0][1] * norms[1]);
  out[1] = half2_bits(p[0][2] * norms[0], p[0][3] * norms[1]);
  out[2] = half2_bits(p[1][0] * norms[2], p[1][1] * norms[3]);
  out[3] = half2_bits(p[1][2] * norms[2], p[1][3] * norms[3]);
}

// The B fragments of values for n-tile 4q + k, from the four tokens' pairs of value_quad(q):
// (token 2c, 2c + 1) and (2c + 8, 2c + 9) at the thread's coordinate of that tile.
__host__ __device__ inline uint2 value_fragment(const uint2 (&pairs)[4], int k) {
  const uint32_t selector = k % 2 ? 0x7632 : 0x5410;
  const uint32_t first = k < 2 ? pairs[0].x : pairs[0].y, second = k < 2 ? pairs[1].x : pairs[1].y;
  const uint32_t third = k < 2 ? pairs[2].x : pairs[2].y, fourth = k < 2 ? pairs[3].x : pairs[3].y;
  return {byte_perm(first, second, selector), byte_perm(third, fourth, selector)};
}

}  // namespace kvsketch::cuda::detail
