// The decode kernel's register fragments, run on the CPU: the 32 threads of a warp load a tile
// and build their operands with the kernel's own functions (cuda/fragments.cuh), an emulated
// mma.m16n8k16 (the PTX ISA's fragment layout) multiplies them, and the results must equal
// plain arithmetic on the unpacked codes. This checks the bit extraction, the byte-permute
// look-ups, the coordinate permutations and the token mapping without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "cuda/fragments.cuh"
#include "cuda/query_staging.cuh"
#include "cuda/warp_rotation.cuh"
#include "kvsketch/codebook.hpp"
#include "kvsketch/codec.hpp"
#include "kvsketch/half.hpp"
#include "host_planes.hpp"

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

// The kernel's operands against plain arithmetic for one 16-token tile with `valid` tokens; SIGNS:
// tq_prod keys (KB bits of scalar indices, then a sign bit per coordinate, and gammas), or QJL's
// (KB = 0: signs alone).
template <int D, int KB, int VB, bool SIGNS = false>
void check_tile(int group, int valid, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  CodebookView key_book, value_book;
  if (KB != kHalfBits && KB > 0) key_book = codebook_view(lloyd_max_codebook(CoordinateLaw::kBeta, D, KB), KB);
  if (VB != kHalfBits) value_book = codebook_view(lloyd_max_codebook(CoordinateLaw::kBeta, D, VB), VB);
  const int scalar_row = D * KB / 8, key_row = scalar_row + (SIGNS ? D / 8 : 0), value_row = D * VB / 8;
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
  std::vector<uint16_t> key_norms(kTile), value_norms(kTile), gammas(kTile);
  for (auto& n : key_norms) n = float_to_half(1.5f + uniform(random));
  for (auto& n : value_norms) n = float_to_half(1.5f + uniform(random));
  for (auto& n : gammas) n = float_to_half(0.3f + 0.2f * uniform(random));
  std::vector<float> rotated(kMaxGroupHeads * D, 0.0f), sketched(kMaxGroupHeads * D, 0.0f);
  for (int i = 0; i < group * D; ++i) rotated[i] = 3.0f * uniform(random);
  for (int i = 0; i < group * D; ++i) sketched[i] = 0.5f * uniform(random);
  const CodebookView sign_table = sign_table_view();

  BodyView body;
  body.key_bits = KB;
  body.value_bits = VB;
  body.key_indices = keys;
  body.value_indices = values;
  body.key_norms = key_norms.data();
  body.value_norms = value_norms.data();
  body.key_signs = SIGNS;
  body.key_gammas = gammas.data();
  body.sign_table = sign_table;
  body.page_tokens = kTile;
  body.key_codebook = key_book;
  body.value_codebook = value_book;

  // What each token's key and value decode to (fp16 operands, as the kernel's look-ups give).
  const auto key_value = [&](int token, int j) -> float {
    if (KB == kHalfBits) return half_to_float(reinterpret_cast<const uint16_t*>(keys)[token * D + j]);
    return half_to_float(float_to_half(key_book.centroids[index_at(keys + token * key_row, KB, j)]));
  };
  const auto sign_value = [&](int token, int j) { return index_at(keys + token * key_row + scalar_row, 1, j) ? 1.0 : -1.0; };
  const auto value_value = [&](int token, int j) -> float {
    if (VB == kHalfBits) return half_to_float(reinterpret_cast<const uint16_t*>(values)[token * D + j]);
    return half_to_float(float_to_half(value_book.centroids[index_at(values + token * value_row, VB, j)]));
  };

  static Tile<D, KB, VB, SIGNS> tiles[32];
  static uint32_t query[32][D / 16][4], sketch_query[32][D / 16][4];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, c = lane % 4;
    tiles[lane].load(body, 0, valid, g, c);
    query_fragments<D>(rotated.data(), group, g, c, query[lane]);
    query_fragments<D>(sketched.data(), group, g, c, sketch_query[lane]);
    for (int i = 0; i < 4; ++i) {
      const int token = std::min(score_token(c, i), valid - 1);
      if (KB != kHalfBits) ASSERT_EQ(tiles[lane].key_norms[i], key_norms[token]) << "lane " << lane << " entry " << i;
      if (VB != kHalfBits) ASSERT_EQ(tiles[lane].value_norms[i], value_norms[token]) << "lane " << lane;
      if (SIGNS && KB > 0) ASSERT_EQ(tiles[lane].gammas[i], gammas[token]) << "lane " << lane;
    }
  }

  // Scores: S^T = Q' K^T over two 8-token halves; tq_prod also the sketched query's product with
  // the signs, and the two combined as the kernel combines them.
  for (int half = 0; half < 2; ++half) {
    float scores[32][4] = {}, sign_scores[32][4] = {};
    for (int s = 0; s < D / 16; ++s) {
      uint32_t a[32][4], b[32][2], sa[32][4], sb[32][2];
      for (int lane = 0; lane < 32; ++lane) {
        for (int r = 0; r < 4; ++r) a[lane][r] = query[lane][s][r], sa[lane][r] = sketch_query[lane][s][r];
        b[lane][0] = b[lane][1] = 0;  // QJL: no scalar part
        if constexpr (KB > 0) {
          const uint2 fragment = key_fragment<KB>(tiles[lane].keys[half], s, key_book);
          b[lane][0] = fragment.x;
          b[lane][1] = fragment.y;
        }
        if constexpr (SIGNS) {
          const uint2 signs = key_fragment<1>(tiles[lane].signs[half], s, sign_table);
          sb[lane][0] = signs.x;
          sb[lane][1] = signs.y;
        }
      }
      emulated_mma(scores, a, b);
      if (SIGNS) emulated_mma(sign_scores, sa, sb);
    }
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane / 4, c = lane % 4;
      for (int r = 0; r < 4; ++r) {
        const int head = g + 8 * (r / 2), token = std::min(8 * half + 2 * c + r % 2, valid - 1);
        // The kernel's token for register r of this half is score_token(c, 2 * half + r % 2).
        ASSERT_EQ(8 * half + 2 * c + r % 2, score_token(c, 2 * half + r % 2));
        double expected = 0.0, expected_signs = 0.0;
        if (head < group)
          for (int j = 0; j < D; ++j) {
            if (KB > 0)
              expected += static_cast<double>(half_to_float(float_to_half(rotated[head * D + j]))) * key_value(token, j);
            expected_signs += half_to_float(float_to_half(sketched[head * D + j])) * sign_value(token, j);
          }
        ASSERT_NEAR(scores[lane][r], expected, 1e-4 * (1.0 + std::abs(expected)))
            << "D " << D << " bits " << KB << " half " << half << " lane " << lane << " register " << r;
        if (!SIGNS) continue;
        ASSERT_NEAR(sign_scores[lane][r], expected_signs, 1e-4 * (1.0 + std::abs(expected_signs)))
            << "D " << D << " signs, half " << half << " lane " << lane << " register " << r;
        const int entry = 2 * half + r % 2;
        const double combined = KB > 0 ? (expected + half_to_float(gammas[token]) * expected_signs) * half_to_float(key_norms[token])
                                       : expected_signs * half_to_float(key_norms[token]);
        const float got = key_score<KB, SIGNS>(scores[lane][r], sign_scores[lane][r], tiles[lane].key_norms[entry],
                                               tiles[lane].gammas[entry]);
        ASSERT_NEAR(got, combined, 1e-4 * (1.0 + std::abs(combined))) << "D " << D << " lane " << lane;
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

TEST(CudaFragments, ProdKeysScoreTheirScalarPartAndSigns) {
  check_tile<128, 2, 3, true>(4, 16, 21);
  check_tile<128, 1, 4, true>(16, 9, 22);
  check_tile<128, 3, 2, true>(1, 16, 23);
  check_tile<64, 2, 2, true>(8, 16, 24);
  check_tile<64, 1, 3, true>(3, 13, 25);
  check_tile<256, 2, 3, true>(6, 16, 26);
  check_tile<256, 3, 4, true>(12, 7, 27);
}

TEST(CudaFragments, QjlKeysScoreTheirSigns) {
  check_tile<128, 0, 3, true>(4, 16, 41);
  check_tile<64, 0, 2, true>(16, 10, 42);
  check_tile<256, 0, 4, true>(7, 16, 43);
}

// 16 key-like rows (a shared offset per channel) of a real codec, encoded and laid out in the
// page store's planes (its packed bytes, one norm per part, gammas), and the codec calibrated on
// them (a split's loudest channels to its first part).
struct CodecTile {
  std::unique_ptr<VectorCodec> codec;
  HostTables storage;
  PartView view;
  std::vector<float> rows;
  CodeBuffer codes;
  std::unique_ptr<HostPlanes> planes;
  const std::vector<uint16_t>& norms;
  const std::vector<uint16_t>& gammas;

  CodecTile(const char* spec, int dim, uint64_t seed)
      : codec(make_codec(spec, dim, seed)), codes(codec->code_bytes()), planes(prepare(dim, seed)),
        norms(planes->norms), gammas(planes->gammas) {}

  std::unique_ptr<HostPlanes> prepare(int dim, uint64_t seed) {
    std::mt19937_64 random(seed);
    std::normal_distribution<float> normal;
    rows.resize(kTile * dim);
    for (int j = 0; j < dim; ++j) {
      const float offset = 2.0f * normal(random) * (j % 5 == 0 ? 3.0f : 1.0f);
      for (int t = 0; t < kTile; ++t) rows[t * dim + j] = offset + normal(random);
    }
    codec->calibrate(rows.data(), kTile);
    view = part_view_on_host({codec.get()}, storage);
    codes = CodeBuffer(codec->code_bytes());
    codec->encode(rows.data(), kTile, codes);
    auto result = std::make_unique<HostPlanes>(view, kTile);
    for (int t = 0; t < kTile; ++t) result->store(codes.row(t), t);
    return result;
  }
  const uint8_t* plane() const { return planes->indices(); }
};

// A real codec's keys scored by the kernel's steps run on the CPU (the query staged: gathered,
// rotated, sketched; the tile's fragments; an emulated mma per part; the combination): the codec's
// own scores within fp16 operand rounding. This checks what the tile test takes as given: the
// rotations and sketch of the query, the sign scale, a split's channels and parts, the planes.
template <int D, int KB, bool SIGNS>
void check_codec_scores(const char* spec, uint64_t seed) {
  using Keys = Layout<D, KB>;
  const CodecTile keys(spec, D, seed);
  ASSERT_EQ(keys.view.layout(), KB) << spec;
  ASSERT_EQ(keys.view.signs, SIGNS) << spec;
  const int group = 5;
  std::mt19937_64 random(seed + 1);
  std::normal_distribution<float> normal;
  std::vector<float> queries(group * D);
  for (float& q : queries) q = normal(random);
  std::vector<uint4> value_storage(kTile * D * 2 / 8 / 16 + 1);  // values of 2 bits: read, not checked
  std::vector<uint16_t> value_norms(kTile);
  BodyView body;
  bind_keys(keys.view, body);
  body.value_bits = 2;
  body.key_indices = keys.plane();
  body.key_norms = keys.norms.data();
  body.key_gammas = keys.gammas.data();
  body.value_indices = reinterpret_cast<uint8_t*>(value_storage.data());
  body.value_norms = value_norms.data();
  body.page_tokens = kTile;

  std::vector<float> rotated(kMaxGroupHeads * D, 0.0f), sketched(kMaxGroupHeads * D, 0.0f), shifts(kMaxGroupHeads);
  for (int h = 0; h < group; ++h)
    stage_query<SIGNS>(body, 0, D, 1.0f, queries.data() + h * D, rotated.data() + h * D, sketched.data() + h * D, 0),
        shifts[h] = query_shift(body, 0, D, 1.0f, queries.data() + h * D);
  static Tile<D, KB, 2, SIGNS> tiles[32];
  static uint32_t query[32][D / 16][4], sketch_query[32][D / 16][4];
  for (int lane = 0; lane < 32; ++lane) {
    tiles[lane].load(body, 0, kTile, lane / 4, lane % 4);
    query_fragments<D, KB>(rotated.data(), group, lane / 4, lane % 4, query[lane]);
    query_fragments<D>(sketched.data(), group, lane / 4, lane % 4, sketch_query[lane]);
  }
  std::vector<float> expected(kTile);
  for (int half = 0; half < 2; ++half) {
    float scores[32][4] = {}, scores1[32][4] = {}, sign_scores[32][4] = {};
    for (int s = 0; s < D / 16; ++s) {
      const int part = Keys::part_of_step(s);
      uint32_t a[32][4], b[32][2], sa[32][4], sb[32][2];
      for (int lane = 0; lane < 32; ++lane) {
        for (int r = 0; r < 4; ++r) a[lane][r] = query[lane][s][r], sa[lane][r] = sketch_query[lane][s][r];
        uint2 fragment{0, 0};  // QJL: no scalar part
        if constexpr (KB > 0)
          if (part == 0)
            fragment = quad_at<Keys::kBits0>(tiles[lane].keys[half], Keys::words(Keys::key_bits(0)), s, body.key_codebook);
        if constexpr (Keys::kSplit)
          if (part == 1)
            fragment = quad_at<Keys::kBits1>(tiles[lane].keys[half] + Keys::key_word(1), Keys::words(Keys::key_bits(1)),
                                             s - Keys::kCount0 / 16, body.key_codebook1);
        b[lane][0] = fragment.x, b[lane][1] = fragment.y;
        if constexpr (SIGNS) {
          const uint2 signs = key_fragment<1>(tiles[lane].signs[half], s, body.sign_table);
          sb[lane][0] = signs.x, sb[lane][1] = signs.y;
        }
      }
      emulated_mma(part == 0 ? scores : scores1, a, b);
      if (SIGNS) emulated_mma(sign_scores, sa, sb);
    }
    for (int lane = 0; lane < 32; ++lane)
      for (int r = 0; r < 4; ++r) {
        const int head = lane / 4 + 8 * (r / 2), entry = 2 * half + r % 2, token = score_token(lane % 4, entry);
        if (head >= group) continue;
        const auto prepared = keys.codec->prepare(queries.data() + head * D);
        keys.codec->scores(*prepared, keys.codes, 0, kTile, expected.data());
        double q_norm = 0.0, k_norm = 0.0;
        for (int j = 0; j < D; ++j)
          q_norm += std::pow(queries[head * D + j], 2), k_norm += std::pow(keys.rows[token * D + j], 2);
        const Tile<D, KB, 2, SIGNS>& tile = tiles[lane];
        const float got = token_score<KB, SIGNS>(scores[lane][r], scores1[lane][r], sign_scores[lane][r],
                                                 tile.key_norms[entry], tile.key_norms1[entry], tile.gammas[entry]) +
                          shifts[head];
        ASSERT_NEAR(got, expected[token], 2e-3 * std::sqrt(q_norm * k_norm))
            << spec << " D " << D << " head " << head << " token " << token;
      }
  }
}

// A real codec's values summed by the kernel's steps run on the CPU (weight fragments times each
// part's norms, an emulated mma per part, the merge's coordinates, the finish's un-rotation per
// part and its scatter to the channels): the weighted sum of the codec's own decoded rows.
template <int D, int VB>
void check_codec_values(const char* spec, uint64_t seed) {
  using Values = Layout<D, VB>;
  const CodecTile values(spec, D, seed);
  ASSERT_EQ(values.view.layout(), VB) << spec;
  const int group = 6;
  std::mt19937_64 random(seed + 2);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> w(group * kTile);
  for (float& x : w) x = half_to_float(float_to_half(uniform(random)));
  std::vector<uint4> key_storage(kTile * D * 2 / 8 / 16 + 1);  // keys of 2 bits: read, not checked
  std::vector<uint16_t> key_norms(kTile);
  BodyView body;
  bind_values(values.view, body);
  body.key_bits = 2;
  body.key_indices = reinterpret_cast<uint8_t*>(key_storage.data());
  body.key_norms = key_norms.data();
  body.value_indices = values.plane();
  body.value_norms = values.norms.data();
  body.page_tokens = kTile;

  static Tile<D, 2, VB> tiles[32];
  static float out[32][D / 8][4];
  static uint32_t weights[32][Values::kParts][4];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, c = lane % 4;
    tiles[lane].load(body, 0, kTile, g, c);
    float p[2][4], norms[Values::kParts][4];
    for (int half = 0; half < 2; ++half)
      for (int k = 0; k < 4; ++k) {
        const int head = g + 8 * (k / 2), token = 8 * half + 2 * c + k % 2;
        p[half][k] = head < group ? w[head * kTile + token] : 0.0f;
      }
    for (int i = 0; i < 4; ++i) {
      norms[0][i] = half_to_float(tiles[lane].value_norms[i]);
      if constexpr (Values::kSplit) norms[1][i] = half_to_float(tiles[lane].value_norms1[i]);
    }
    for (int part = 0; part < Values::kParts; ++part) weight_fragment(p, norms[part], weights[lane][part]);
    for (int j = 0; j < D / 8; ++j) out[lane][j][0] = out[lane][j][1] = out[lane][j][2] = out[lane][j][3] = 0.0f;
  }
  for (int j = 0; j < D / 8; ++j) {
    const int part = Values::part_of_tile(j), local = j - Values::first(part) / 8;
    uint32_t a[32][4], b[32][2];
    float tile_out[32][4] = {};
    for (int lane = 0; lane < 32; ++lane) {
      for (int r = 0; r < 4; ++r) a[lane][r] = weights[lane][part][r];
      uint2 pairs[4];
      for (int i = 0; i < 4; ++i) {
        if (part == 0)
          pairs[i] = quad_at<Values::kBits0>(tiles[lane].values[i], Values::words(Values::value_bits(0)), local / 4,
                                             body.value_codebook);
        if constexpr (Values::kSplit)
          if (part == 1)
            pairs[i] = quad_at<Values::kBits1>(tiles[lane].values[i] + Values::value_word(1),
                                               Values::words(Values::value_bits(1)), local / 4, body.value_codebook1);
      }
      const uint2 fragment = value_fragment(pairs, local % 4);
      b[lane][0] = fragment.x, b[lane][1] = fragment.y;
    }
    emulated_mma(tile_out, a, b);
    for (int lane = 0; lane < 32; ++lane)
      for (int r = 0; r < 4; ++r) out[lane][j][r] = tile_out[lane][r];
  }
  std::vector<float> decoded(kTile * D);
  values.codec->decode(values.codes, 0, kTile, decoded.data());
  for (int head = 0; head < group; ++head) {
    std::vector<float> accumulator(D, 0.0f), output(D, 0.0f), expected(D, 0.0f);
    for (int lane = 0; lane < 32; ++lane)
      for (int j = 0; j < D / 8; ++j)
        for (int r = 0; r < 4; ++r)
          if (lane / 4 + 8 * (r / 2) == head) accumulator[value_coordinate<D, VB>(lane % 4, r, j)] = out[lane][j][r];
    warp_rotate_transpose(body.value_rotation, 0, accumulator.data(), 0);
    if (body.value_channels) {
      warp_rotate_transpose(body.value_rotation1, 0, accumulator.data() + body.value_rotation.dim, 0);
      for (int j = 0; j < D; ++j) output[body.value_channels[j]] = accumulator[j];
    } else {
      output = accumulator;
    }
    if (body.value_mean) {  // the finish's centring: the mean times the weights' sum
      double total = 0.0;
      for (int t = 0; t < kTile; ++t) total += w[head * kTile + t];
      for (int j = 0; j < D; ++j) output[j] += static_cast<float>(total) * body.value_mean[j];
    }
    double error = 0.0, norm = 0.0;
    for (int j = 0; j < D; ++j) {
      for (int t = 0; t < kTile; ++t) expected[j] += w[head * kTile + t] * decoded[t * D + j];
      error += std::pow(output[j] - expected[j], 2);
      norm += std::pow(expected[j], 2);
    }
    ASSERT_LT(std::sqrt(error / norm), 3e-3) << spec << " D " << D << " head " << head;
  }
}

TEST(CudaFragments, StagedQueriesAndPlanesGiveTheCodecsScores) {
  check_codec_scores<128, 3, false>("tq_mse:b=3,rescale=1", 31);
  check_codec_scores<128, 2, true>("tq_prod:b=3", 32);
  check_codec_scores<128, 1, true>("tq_prod:b=2", 33);
  check_codec_scores<128, 3, true>("tq_prod:b=4,rounds=3", 34);
  check_codec_scores<64, 2, true>("tq_prod:b=3", 35);
  check_codec_scores<256, 2, true>("tq_prod:b=3", 36);
  check_codec_scores<128, 0, true>("qjl", 37);
  check_codec_scores<128, 0, true>("qjl:sketch=hadamard", 38);
  check_codec_scores<64, 0, true>("qjl:sketch=gaussian", 39);
  check_codec_scores<256, 0, true>("qjl:sketch=hadamard,rounds=3", 40);
}

TEST(CudaFragments, SplitKeysScoreEachPartWithItsNorm) {
  check_codec_scores<128, kSplit25, false>("tq_mse:b=2.5", 51);
  check_codec_scores<128, kSplit35, false>("tq_mse:b=3.5,rescale=1", 52);
  check_codec_scores<256, kSplit25, false>("tq_mse:b=2.5,rescale=1", 53);
  check_codec_scores<256, kSplit35, false>("tq_mse:b=3.5", 54);
}

TEST(CudaFragments, CentredKeysAddTheQueryShift) {
  check_codec_scores<128, 3, false>("center:tq_mse:b=3,rescale=1", 55);
  check_codec_scores<128, kSplit35, false>("center:tq_mse:b=3.5,rescale=1", 56);
  check_codec_scores<128, 2, true>("center:tq_prod:b=3", 57);
}

TEST(CudaFragments, ValueSumsUnrotatedGiveTheCodecsDecodedRows) {
  check_codec_values<128, 3>("tq_mse:b=3", 61);
  check_codec_values<64, 2>("tq_mse:b=2,rescale=1", 62);
  check_codec_values<256, 4>("tq_mse:b=4", 63);
  check_codec_values<128, kSplit25>("tq_mse:b=2.5", 64);
  check_codec_values<128, kSplit35>("tq_mse:b=3.5,rescale=1", 65);
  check_codec_values<256, kSplit25>("tq_mse:b=2.5,rescale=1", 66);
  check_codec_values<256, kSplit35>("tq_mse:b=3.5", 67);
  check_codec_values<128, 3>("center:tq_mse:b=3,rescale=1", 68);
  check_codec_values<128, kSplit25>("center:tq_mse:b=2.5,rescale=1", 69);
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
