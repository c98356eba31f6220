// The integer attention kernels: the same bits as their scalar definition on every instruction
// set, and close to the float kernels they replace.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "kvsketch/bitpack.hpp"
#include "kvsketch/codebook.hpp"
#include "kvsketch/half.hpp"
#include "kvsketch/random.hpp"
#include "simd/amx.hpp"
#include "simd/attention_kernels.hpp"
#include "simd/int_index_kernels.hpp"
#include "index_rows.hpp"
#include "test_util.hpp"

using namespace kvsketch;
using testutil::IndexRowsData;

namespace {

std::vector<float> gaussians(size_t n, uint64_t seed) { return testutil::gaussian_matrix(n, 1, seed); }

// Softmax-like weights spanning many orders of magnitude, with an all-zero block.
std::vector<float> weights(size_t heads, size_t n, uint64_t seed) {
  auto w = gaussians(heads * n, seed);
  for (size_t k = 0; k < w.size(); ++k) w[k] = std::exp(4.0f * w[k]);
  for (size_t h = 0; h < heads; ++h)
    for (size_t i = 64; i < std::min<size_t>(n, 128); ++i) w[h * n + i] = 0.0f;
  return w;
}

// Every kernel against its scalar definition over bits, dimensions, row counts and head counts.
void same_bits_as_reference() {
  for (int bits = 1; bits <= 4; ++bits) {
    const auto& table = lloyd_max_codebook(CoordinateLaw::kBeta, 128, bits).centroids;
    // 192: three 64-coordinate chunks (AVX3_DL's loop that is not unrolled); 1088: past the 1024
    // coordinates that AVX3_DL unpacks in registers (its fallback path); 16, 32, 48, 80, 96 and 100: a
    // last chunk of 1, 2, 3, 1, 2 and 3 blocks of 16 coordinates (the scores skip the blocks past
    // dim, the weighted sums the vectors; with 64, 128 and 256, every unrolled form of the scores).
    for (const size_t dim : {size_t{16}, size_t{32}, size_t{48}, size_t{64}, size_t{80}, size_t{96}, size_t{100},
                             size_t{128}, size_t{192}, size_t{256}, size_t{1088}}) {
      for (const size_t n : {size_t{1}, size_t{5}, size_t{131}, size_t{200}}) {
        for (const size_t heads : {size_t{1}, size_t{4}, size_t{6}, size_t{8}, size_t{17}}) {
          SCOPED_TRACE(testing::Message() << "bits " << bits << " dim " << dim << " n " << n << " heads " << heads);
          const IndexRowsData rows(n, dim, bits, table.data(), 7 * dim + n);
          const auto queries = gaussians(heads * dim, 11 * heads + dim);
          std::vector<float> fast(heads * n), slow(heads * n);
          simd::int_index_scores(rows.source, n, queries.data(), heads, 0.125f, fast.data(), n);
          simd::reference::int_index_scores(rows.source, n, queries.data(), heads, 0.125f, slow.data(), n);
          EXPECT_EQ(fast, slow);
          auto w = weights(heads, n, 13 * n + heads);
          for (size_t k = 0; k < w.size(); k += 7) w[k] = -w[k];  // any sign
          auto acc_fast = gaussians(heads * dim, 17), acc_slow = acc_fast;
          simd::int_index_weighted_sum(rows.source, n, w.data(), heads, n, acc_fast.data(), dim);
          simd::reference::int_index_weighted_sum(rows.source, n, w.data(), heads, n, acc_slow.data(), dim);
          EXPECT_EQ(acc_fast, acc_slow);
          // With the fp16 factor each row carries.
          const simd::RowFactor factors{packed_bytes(dim, bits), true};
          simd::int_index_scores(rows.source, n, queries.data(), heads, 0.125f, fast.data(), n, &factors);
          simd::reference::int_index_scores(rows.source, n, queries.data(), heads, 0.125f, slow.data(), n, &factors);
          EXPECT_EQ(fast, slow);
          simd::int_index_weighted_sum(rows.source, n, w.data(), heads, n, acc_fast.data(), dim, &factors);
          simd::reference::int_index_weighted_sum(rows.source, n, w.data(), heads, n, acc_slow.data(), dim, &factors);
          EXPECT_EQ(acc_fast, acc_slow);
        }
      }
    }
  }
}

}  // namespace

// Where the CPU has AMX (target AVX3_DL), the cases run on the tile kernels (up to 16 heads for
// scores, 7 for weighted sums) and again without them; where it has VNNI, the AVX2 and AVX3 targets'
// kernels run with it and again without.
TEST(IntIndexKernels, SameBitsAsReferenceOnEveryTarget) {
  std::printf("AMX tile kernels %s on this machine\n", simd::amx_usable() ? "run" : "do not run");
  testutil::for_each_target([] {
    for (const bool amx : {true, false})
      for (const bool vnni : {true, false}) {
        if (amx && !vnni) continue;  // the AMX kernels do not use the shuffle targets' VNNI
        const bool previous_amx = simd::set_amx_allowed(amx), previous_vnni = simd::set_shuffle_vnni_allowed(vnni);
        SCOPED_TRACE(testing::Message() << (amx ? "AMX allowed" : "AMX off") << (vnni ? ", VNNI" : ", no VNNI"));
        same_bits_as_reference();
        simd::set_amx_allowed(previous_amx);
        simd::set_shuffle_vnni_allowed(previous_vnni);
      }
  });
}


TEST(IntIndexKernels, CloseToTheFloatKernels) {
  for (int bits = 2; bits <= 4; ++bits) {
    const size_t dim = 128, n = 1000, heads = 4;
    const auto& table = lloyd_max_codebook(CoordinateLaw::kBeta, dim, bits).centroids;
    const IndexRowsData rows(n, dim, bits, table.data(), 99 + bits);
    const auto queries = gaussians(heads * dim, 5);
    std::vector<float> exact(heads * n), approx(heads * n);
    simd::row_scores(rows.source, n, queries.data(), heads, 1.0f, exact.data(), n);
    simd::int_index_scores(rows.source, n, queries.data(), heads, 1.0f, approx.data(), n);
    double error = 0, total = 0;
    for (size_t k = 0; k < exact.size(); ++k) {
      error += std::pow(approx[k] - exact[k], 2.0);
      total += std::pow(exact[k], 2.0);
    }
    // Byte queries and table: about 1% of the scores' spread (b-bit quantization is 10-50%).
    EXPECT_LT(std::sqrt(error / total), 0.015) << bits << " bits";
    EXPECT_GT(std::sqrt(error / total), 1e-4) << "the bytes should round something";

    const auto w = weights(heads, n, 3);
    std::vector<float> acc_exact(heads * dim, 0.0f), acc_approx(heads * dim, 0.0f);
    simd::row_weighted_sum(rows.source, n, w.data(), heads, n, acc_exact.data(), dim);
    simd::int_index_weighted_sum(rows.source, n, w.data(), heads, n, acc_approx.data(), dim);
    std::vector<float> difference(acc_exact.size());
    for (size_t k = 0; k < difference.size(); ++k) difference[k] = acc_approx[k] - acc_exact[k];
    EXPECT_LT(testutil::norm(difference.data(), difference.size()) / testutil::norm(acc_exact.data(), acc_exact.size()),
              0.01)
        << bits << " bits";
  }
}

// The fused attention kernel against its definition (reference::int_index_attention): the same
// maxima and accumulators bit for bit, the same sums of exponentials but for their order; and
// against the separate passes (the key parts' scores combined as AttentionKeys says, one softmax
// over all rows, each value part's weighted sum), which it equals up to float rounding. Keys whose
// norms grow along the rows make the running maximum rise in most blocks, so that the rescaling
// runs. The key layouts: TurboQuant mse (one part with its norm), the outlier split (two groups of
// one part), TurboQuant prod (scalar indices without a factor and 1-bit signs with theirs and a
// scale, the sum times the norm) and the split of prods (two such groups); the last three with a
// shift per head (centred keys).
TEST(IntIndexKernels, FusedAttentionMatchesItsDefinition) {
  struct Part {
    size_t dim;
    int bits;
  };
  struct Layout {
    std::vector<std::vector<Part>> groups;  // a group of two parts is prod's: the norm over their sum
    std::vector<Part> values;
  };
  const std::vector<Layout> layouts = {
      {{{{64, 1}}}, {{64, 4}}},
      {{{{128, 3}}}, {{128, 2}}},
      {{{{96, 4}}}, {{96, 1}}},
      {{{{192, 2}}}, {{192, 3}}},
      {{{{32, 3}}, {{96, 2}}}, {{32, 4}, {96, 3}}},
      {{{{32, 4}}, {{96, 3}}}, {{128, 3}}},
      {{{{128, 2}, {128, 1}}}, {{128, 3}}},
      {{{{64, 3}, {64, 1}}}, {{32, 2}, {32, 4}}},
      {{{{32, 3}, {32, 1}}, {{96, 2}, {96, 1}}}, {{32, 3}, {96, 2}}}};
  constexpr size_t kCounts = 5, kHeadCounts = 4;
  for (const bool vnni : {true, false}) {  // the AVX2 and AVX3 kernels with VNNI where the CPU has it, and without
    const bool previous_vnni = simd::set_shuffle_vnni_allowed(vnni);
    SCOPED_TRACE(vnni ? "VNNI allowed" : "VNNI off");
    testutil::for_each_target([&] {
      int fused_runs = 0;
      for (size_t l = 0; l < layouts.size(); ++l)
        for (const size_t n : {size_t{1}, size_t{63}, size_t{64}, size_t{200}, size_t{1000}})
          for (const size_t heads : {size_t{1}, size_t{4}, size_t{6}, size_t{9}}) {
            const Layout& layout = layouts[l];
            SCOPED_TRACE(testing::Message() << "layout " << l << " n " << n << " heads " << heads);
            std::vector<std::unique_ptr<IndexRowsData>> rows;
            const auto make_rows = [&](const Part& part, uint64_t seed) -> IndexRowsData& {
              const auto& table = lloyd_max_codebook(CoordinateLaw::kBeta, part.dim, part.bits).centroids;
              return *rows.emplace_back(std::make_unique<IndexRowsData>(n, part.dim, part.bits, table.data(), seed));
            };
            std::vector<std::vector<float>> queries;
            std::vector<std::vector<simd::AttentionPart>> key_parts(layout.groups.size());
            std::vector<simd::RowFactor> group_factors(layout.groups.size());
            std::vector<simd::AttentionKeyGroup> groups;
            for (size_t g = 0; g < layout.groups.size(); ++g) {
              const bool product = layout.groups[g].size() == 2;
              for (size_t p = 0; p < layout.groups[g].size(); ++p) {
                const Part& shape = layout.groups[g][p];
                IndexRowsData& part = make_rows(shape, 3 * n + 7 * g + p);
                const size_t factor_at = packed_bytes(shape.dim, shape.bits);
                if (p == 0)
                  for (size_t i = 0; i < n; ++i) {  // norms rising from 1 to 5 along the rows
                    const uint16_t norm = float_to_half(1.0f + 4.0f * static_cast<float>(i) / static_cast<float>(n));
                    std::memcpy(part.codes.data() + i * part.source.stride + factor_at, &norm, sizeof(norm));
                  }
                queries.push_back(gaussians(heads * shape.dim, 7 * heads + 3 * g + p));
                simd::AttentionPart key{part.source, simd::RowFactor{factor_at, true}, queries.back().data()};
                key.scale = 3.0f;  // logits spanning tens of units: weights down to e^-40
                if (product && p == 0) key.factor.reset();  // the norm comes after the sum
                if (product && p == 1) key.scale = 0.7f;
                key_parts[g].push_back(key);
              }
              group_factors[g] = simd::RowFactor{packed_bytes(layout.groups[g][0].dim, layout.groups[g][0].bits), true};
            }
            for (size_t g = 0; g < layout.groups.size(); ++g)
              groups.push_back({key_parts[g].data(), key_parts[g].size(),
                                key_parts[g].size() == 2 ? &group_factors[g] : nullptr});
            std::vector<float> shift(heads);
            for (size_t h = 0; h < heads; ++h) shift[h] = 0.5f * static_cast<float>(h) - 1.0f;
            const bool shifted = l >= 4;
            const simd::AttentionKeys keys{groups.data(), groups.size(), shifted ? shift.data() : nullptr};

            size_t width = 0;
            for (const Part& part : layout.values) width += part.dim;
            std::vector<simd::AttentionPart> values;
            std::vector<float> acc(heads * width, 0.0f), ref_acc(heads * width, 0.0f);
            for (size_t p = 0, offset = 0; p < layout.values.size(); offset += layout.values[p].dim, ++p) {
              IndexRowsData& part = make_rows(layout.values[p], 5 * n + p);
              values.push_back({part.source, simd::RowFactor{packed_bytes(layout.values[p].dim, layout.values[p].bits),
                                                             true},
                                nullptr, acc.data() + offset, width});
            }
            std::vector<float> max(heads), sum(heads);
            if (!simd::int_index_attention(keys, values.data(), values.size(), n, heads, max.data(), sum.data()))
              continue;  // no kernel on this target
            ++fused_runs;
            std::vector<simd::AttentionPart> ref_values = values;
            for (size_t p = 0, offset = 0; p < values.size(); offset += layout.values[p].dim, ++p)
              ref_values[p].acc = ref_acc.data() + offset;
            std::vector<float> ref_max(heads), ref_sum(heads);
            ASSERT_TRUE(simd::reference::int_index_attention(keys, ref_values.data(), values.size(), n, heads,
                                                             ref_max.data(), ref_sum.data()));
            EXPECT_EQ(max, ref_max);
            EXPECT_EQ(acc, ref_acc);
            for (size_t h = 0; h < heads; ++h) EXPECT_NEAR(sum[h], ref_sum[h], 1e-6 * ref_sum[h]) << h;

            // The separate passes over all rows.
            std::vector<float> logits(heads * n, 0.0f), group_logits(heads * n), part_logits(heads * n);
            for (const simd::AttentionKeyGroup& group : groups) {
              std::fill(group_logits.begin(), group_logits.end(), 0.0f);
              for (size_t p = 0; p < group.count; ++p) {
                const simd::AttentionPart& part = group.parts[p];
                simd::int_index_scores(part.rows, n, part.queries, heads, part.scale, part_logits.data(), n,
                                       part.row_factor());
                for (size_t k = 0; k < logits.size(); ++k) group_logits[k] += part_logits[k];
              }
              std::vector<float> norms(n, 1.0f);
              if (group.factor) simd::load_row_factors(group.parts[0].rows, group.factor, 0, n, norms.data());
              for (size_t h = 0; h < heads; ++h)
                for (size_t i = 0; i < n; ++i) logits[h * n + i] += group_logits[h * n + i] * norms[i];
            }
            if (shifted)
              for (size_t h = 0; h < heads; ++h)
                for (size_t i = 0; i < n; ++i) logits[h * n + i] += shift[h];
            for (size_t h = 0; h < heads; ++h) {
              float* row = logits.data() + h * n;
              EXPECT_EQ(max[h], *std::max_element(row, row + n));
              const float total = simd::exp_shifted_sum(row, n, max[h]);
              EXPECT_NEAR(sum[h], total, 1e-5 * total) << h;
            }
            std::vector<float> two_pass(heads * width, 0.0f);
            for (size_t p = 0, offset = 0; p < values.size(); offset += layout.values[p].dim, ++p)
              simd::int_index_weighted_sum(values[p].rows, n, logits.data(), heads, n, two_pass.data() + offset, width,
                                           &*values[p].factor);
            std::vector<float> difference(acc.size());
            for (size_t k = 0; k < acc.size(); ++k) difference[k] = acc[k] - two_pass[k];
            EXPECT_LT(testutil::norm(difference.data(), difference.size()),
                      1e-5 * testutil::norm(two_pass.data(), two_pass.size()));
          }
      // The kernel runs every case on every SIMD target, AVX3_DL with AMX included.
      const int64_t supported = hwy::SupportedTargets(), target = supported & -supported;  // the best
      const bool runs = target != HWY_SCALAR && target != HWY_EMU128;
      std::printf("%s: fused attention ran %d times\n", hwy::TargetName(target), fused_runs);
      EXPECT_EQ(fused_runs, runs ? static_cast<int>(layouts.size() * kCounts * kHeadCounts) : 0);
    });
    simd::set_shuffle_vnni_allowed(previous_vnni);
  }
}

TEST(IntIndexKernels, ByteRoundingIsNearestEven) {
  // With 127 the largest magnitude the factor is 1: every half-integer shows the tie rule.
  std::vector<float> x = {127.0f};
  for (float v = -126.75f; v <= 126.75f; v += 0.25f) x.push_back(v);
  std::vector<int8_t> out(x.size());
  EXPECT_EQ(simd::round_to_bytes(x.data(), x.size(), out.data()), 1.0f);
  for (size_t j = 0; j < x.size(); ++j) ASSERT_EQ(out[j], static_cast<int8_t>(std::nearbyint(x[j]))) << x[j];
  EXPECT_EQ(out[2], -126);  // -126.5 rounds to the even -126
  // Any scale: the same as nearbyint of the scaled value.
  const auto g = gaussians(4096, 3);
  std::vector<int8_t> bytes(g.size());
  const float unit = simd::round_to_bytes(g.data(), g.size(), bytes.data());
  float top = 0.0f;
  for (const float v : g) top = std::max(top, std::fabs(v));
  ASSERT_EQ(unit, top / 127.0f);
  for (size_t j = 0; j < g.size(); ++j) ASSERT_EQ(bytes[j], static_cast<int8_t>(std::nearbyint(g[j] * (127.0f / top))));
}

TEST(IntIndexKernels, WholeNumberTablesKeepExactLevels) {
  // q4_0's levels - 8: seven times each within +-63 (scores), fifteen times within +-127 (sums).
  std::vector<float> centered(16);
  for (size_t l = 0; l < 16; ++l) centered[l] = static_cast<float>(l) - 8.0f;
  const simd::ByteTable scores = simd::byte_table(centered.data(), 4, simd::kScoreTableLargest);
  const simd::ByteTable sums = simd::byte_table(centered.data(), 4, simd::kWeightLargest);
  EXPECT_EQ(scores.scale, 1.0f / 7.0f);
  EXPECT_EQ(sums.scale, 1.0f / 15.0f);
  for (size_t l = 0; l < 16; ++l) {
    EXPECT_EQ(scores.levels[l], 7 * (static_cast<int>(l) - 8));
    EXPECT_EQ(sums.levels[l], 15 * (static_cast<int>(l) - 8));
  }
  // Signs stay at the largest; a table with a fraction is rounded against its largest as before.
  const float signs[2] = {-1.0f, 1.0f};
  EXPECT_EQ(simd::byte_table(signs, 1, 63).levels[0], -63);
  const float fraction[2] = {-0.5f, 2.0f};
  const simd::ByteTable rounded = simd::byte_table(fraction, 1, 63);
  EXPECT_EQ(rounded.scale, 2.0f / 63.0f);
  EXPECT_EQ(rounded.levels[0], -16);  // -15.75
}
