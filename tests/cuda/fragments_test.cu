// The decode kernel's register fragments, run on the CPU: the 32 threads of a warp load a tile
// and build their operands with the kernel's own functions (cuda/fragments.cuh), an emulated
// mma.m16n8k16 (the PTX ISA's fragment layout) multiplies them, and the results must equal
// plain arithmetic on the unpacked codes. This checks the bit extraction, the byte-permute
// look-ups, the coordinate permutations and the token mapping without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cuda/fragments.cuh"
#include "kvsketch/codebook.hpp"
#include "kvsketch/half.hpp"

namespace kvsketch::cuda::detail {
namespace {

float low_half(uint32_t pair) { return half_to_float(static_cast<uint16_t>(pair & 0xffff)); }
float high_half(uint32_t pair) { return half_to_float(static_cast<uint16_t>(pair >> 16)); }

// D = A B + C for one warp, per the PTX ISA's m16n8k16 .f16 fragments: thread 4g + c holds
// A rows g, g + 8 and columns 2c, 2c + 1 (+ 8); B rows 2c, 2c + 1 (+ 8) of column g; C rows g,
// g + 8 of columns 2c, 2c + 1.
void emulated_mma(float (&d)[32][4], const uint32_t (&a)[32][4], const uint32_t (&b)[32][2]) {
  float A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, c = lane % 4;
    for (int r = 0; r < 4; ++r) {
      const int row = g + 8 * (r % 2), column = 2 * c + 8 * (r / 2);
      A[row][column] = low_half(a[lane][r]);
      A[row][column + 1] = high_half(a[lane][r]);
    }
    for (int r = 0; r < 2; ++r) {
      B[2 * c + 8 * r][g] = low_half(b[lane][r]);
      B[2 * c + 8 * r + 1][g] = high_half(b[lane][r]);
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, c = lane % 4;
    for (int r = 0; r < 4; ++r) {
      const int row = g + 8 * (r / 2), column = 2 * c + r % 2;
      double sum = 0.0;
      for (int k = 0; k < 16; ++k) sum += static_cast<double>(A[row][k]) * B[k][column];
      d[lane][r] += static_cast<float>(sum);
    }
  }
}

// Index j of a row packed at `bits` bits, least significant first (bitpack.hpp).
int index_at(const uint8_t* row, int bits, int j) {
  int value = 0;
  for (int b = 0; b < bits; ++b) {
    const int bit = j * bits + b;
    value |= ((row[bit / 8] >> (bit % 8)) & 1) << b;
  }
  return value;
}

struct TileData {
  std::vector<uint8_t> keys, values;
  std::vector<uint16_t> key_norms, value_norms;
};

// The kernel's operands against plain arithmetic for one 16-token tile with `valid` tokens.
template <int D, int KB, int VB>
void check_tile(int group, int valid, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  CodebookView key_book, value_book;
  if (KB != kHalfBits) key_book = codebook_view(lloyd_max_codebook(CoordinateLaw::kBeta, D, KB), KB);
  if (VB != kHalfBits) value_book = codebook_view(lloyd_max_codebook(CoordinateLaw::kBeta, D, VB), VB);
  const int key_row = D * KB / 8, value_row = D * VB / 8;
  // 16-byte aligned planes, as the page pool lays them out.
  std::vector<uint4> key_storage((kTile * key_row + 15) / 16), value_storage((kTile * value_row + 15) / 16);
  auto* keys = reinterpret_cast<uint8_t*>(key_storage.data());
  auto* values = reinterpret_cast<uint8_t*>(value_storage.data());
  for (int i = 0; i < kTile * key_row; ++i) keys[i] = static_cast<uint8_t>(byte(random));
  for (int i = 0; i < kTile * value_row; ++i) values[i] = static_cast<uint8_t>(byte(random));
  if constexpr (KB == kHalfBits)  // finite halves
    for (int i = 0; i < kTile * D; ++i) reinterpret_cast<uint16_t*>(keys)[i] = float_to_half(uniform(random));
  if constexpr (VB == kHalfBits)
    for (int i = 0; i < kTile * D; ++i) reinterpret_cast<uint16_t*>(values)[i] = float_to_half(uniform(random));
  std::vector<uint16_t> key_norms(kTile), value_norms(kTile);
  for (auto& n : key_norms) n = float_to_half(1.5f + uniform(random));
  for (auto& n : value_norms) n = float_to_half(1.5f + uniform(random));
  std::vector<float> rotated(kMaxGroupHeads * D, 0.0f);
  for (int i = 0; i < group * D; ++i) rotated[i] = 3.0f * uniform(random);

  BodyView body;
  body.key_bits = KB;
  body.value_bits = VB;
  body.key_indices = keys;
  body.value_indices = values;
  body.key_norms = key_norms.data();
  body.value_norms = value_norms.data();
  body.page_tokens = kTile;
  body.key_codebook = key_book;
  body.value_codebook = value_book;

  // What each token's key and value decode to (fp16 operands, as the kernel's look-ups give).
  const auto key_value = [&](int token, int j) -> float {
    if (KB == kHalfBits) return half_to_float(reinterpret_cast<const uint16_t*>(keys)[token * D + j]);
    return half_to_float(float_to_half(key_book.centroids[index_at(keys + token * key_row, KB, j)]));
  };
  const auto value_value = [&](int token, int j) -> float {
    if (VB == kHalfBits) return half_to_float(reinterpret_cast<const uint16_t*>(values)[token * D + j]);
    return half_to_float(float_to_half(value_book.centroids[index_at(values + token * value_row, VB, j)]));
  };

  static Tile<D, KB, VB> tiles[32];
  static uint32_t query[32][D / 16][4];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, c = lane % 4;
    tiles[lane].load(body, 0, valid, g, c);
    query_fragments<D>(rotated.data(), group, g, c, query[lane]);
    for (int i = 0; i < 4; ++i) {
      const int token = std::min(score_token(c, i), valid - 1);
      if (KB != kHalfBits) ASSERT_EQ(tiles[lane].key_norms[i], key_norms[token]) << "lane " << lane << " entry " << i;
      if (VB != kHalfBits) ASSERT_EQ(tiles[lane].value_norms[i], value_norms[token]) << "lane " << lane;
    }
  }

  // Scores: S^T = Q' K^T over two 8-token halves.
  for (int half = 0; half < 2; ++half) {
    float scores[32][4] = {};
    for (int s = 0; s < D / 16; ++s) {
      uint32_t a[32][4], b[32][2];
      for (int lane = 0; lane < 32; ++lane) {
        for (int r = 0; r < 4; ++r) a[lane][r] = query[lane][s][r];
        const uint2 fragment = key_fragment<KB>(tiles[lane].keys[half], s, key_book);
        b[lane][0] = fragment.x;
        b[lane][1] = fragment.y;
      }
      emulated_mma(scores, a, b);
    }
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane / 4, c = lane % 4;
      for (int r = 0; r < 4; ++r) {
        const int head = g + 8 * (r / 2), token = std::min(8 * half + 2 * c + r % 2, valid - 1);
        // The kernel's token for register r of this half is score_token(c, 2 * half + r % 2).
        ASSERT_EQ(8 * half + 2 * c + r % 2, score_token(c, 2 * half + r % 2));
        double expected = 0.0;
        if (head < group)
          for (int j = 0; j < D; ++j)
            expected += static_cast<double>(half_to_float(float_to_half(rotated[head * D + j]))) * key_value(token, j);
        ASSERT_NEAR(scores[lane][r], expected, 1e-4 * (1.0 + std::abs(expected)))
            << "D " << D << " bits " << KB << " half " << half << " lane " << lane << " register " << r;
      }
    }
  }

  // Values: O = W V with arbitrary fp16 weights W (query heads x 16 tokens) in the A layout.
  std::vector<float> w(16 * kTile);
  for (float& x : w) x = half_to_float(float_to_half(uniform(random)));
  uint32_t weights[32][4];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, c = lane % 4;
    for (int r = 0; r < 4; ++r) {
      const int head = g + 8 * (r % 2), token = 2 * c + 8 * (r / 2);
      weights[lane][r] = half2_bits(w[head * kTile + token], w[head * kTile + token + 1]);
    }
  }
  for (int q4 = 0; q4 < D / 32; ++q4)
    for (int k = 0; k < 4; ++k) {
      float out[32][4] = {};
      uint32_t b[32][2];
      for (int lane = 0; lane < 32; ++lane) {
        uint2 pairs[4];
        for (int i = 0; i < 4; ++i) pairs[i] = value_quad<VB>(tiles[lane].values[i], q4, value_book);
        const uint2 fragment = value_fragment(pairs, k);
        b[lane][0] = fragment.x;
        b[lane][1] = fragment.y;
      }
      emulated_mma(out, weights, b);
      const int j = 4 * q4 + k;
      for (int lane = 0; lane < 32; ++lane) {
        const int g = lane / 4, c = lane % 4;
        for (int r = 0; r < 4; ++r) {
          const int head = g + 8 * (r / 2), coordinate = value_coordinate<D>(c, r, j);
          double expected = 0.0;
          for (int t = 0; t < kTile; ++t)
            expected += static_cast<double>(w[head * kTile + t]) * value_value(std::min(t, valid - 1), coordinate);
          ASSERT_NEAR(out[lane][r], expected, 1e-4 * (1.0 + std::abs(expected)))
              << "D " << D << " bits " << VB << " tile " << j << " lane " << lane << " register " << r;
        }
      }
    }
}

TEST(CudaFragments, ScoresAndValueSumsEqualPlainArithmeticOnTheCodes) {
  check_tile<128, 3, 3>(4, 16, 1);
  check_tile<128, 3, 3>(16, 11, 2);
  check_tile<128, 2, 4>(8, 16, 3);
  check_tile<128, 4, 2>(1, 5, 4);
  check_tile<64, 3, 3>(7, 16, 5);
  check_tile<64, 2, 2>(3, 16, 6);
  check_tile<64, 4, 4>(16, 9, 7);
  check_tile<256, 3, 3>(4, 16, 8);
  check_tile<256, 4, 3>(2, 13, 9);
  check_tile<256, 2, 2>(12, 16, 10);
}

TEST(CudaFragments, Fp16BodyEqualsPlainArithmetic) {
  check_tile<128, kHalfBits, kHalfBits>(4, 16, 11);
  check_tile<64, kHalfBits, kHalfBits>(9, 7, 12);
  check_tile<256, kHalfBits, kHalfBits>(16, 16, 13);
}

TEST(CudaFragments, ByteTablesHoldTheCodebooksHalves) {
  for (int bits : {2, 3, 4}) {
    const Codebook& book = lloyd_max_codebook(CoordinateLaw::kBeta, 128, bits);
    const CodebookView view = codebook_view(book, bits);
    for (uint32_t index = 0; index < (1u << bits); ++index) {
      const uint32_t selector = index | index << 4 | index << 8 | index << 12;
      const uint2 pairs = bits == 2 ? centroid_pairs<2>(selector, view)
                          : bits == 3 ? centroid_pairs<3>(selector, view)
                                      : centroid_pairs<4>(selector, view);
      const uint16_t expected = float_to_half(book.centroids[index]);
      EXPECT_EQ(pairs.x & 0xffff, expected) << bits << " bits, index " << index;
      EXPECT_EQ(pairs.y >> 16, expected) << bits << " bits, index " << index;
    }
  }
}

}  // namespace
}  // namespace kvsketch::cuda::detail
