#include <gtest/gtest.h>
#include <hwy/targets.h>
#include <omp.h>

#include <cmath>

#include "codec/codec_base.hpp"
#include "codec/channel_split.hpp"
#include "codec/qjl.hpp"
#include "codec/centered_codec.hpp"
#include "kvsketch/codec.hpp"
#include "core/require.hpp"
#include "simd/kernels.hpp"
#include "test_util.hpp"

using namespace kvsketch;

namespace {

std::vector<std::string> all_specs() {
  std::vector<std::string> specs = {"fp16",
                                    "int8",
                                    "qjl:m=64",
                                    "qjl:m=256,sketch=gaussian",
                                    "qjl:m=200,sketch=hadamard",
                                    "qjl:m=128,outliers=8,m_out=64",
                                    "tq_mse:b=3,rotation=haar",
                                    "tq_prod:b=3,sketch=gaussian",
                                    "tq_prod:b=2,sketch=orthogonal",
                                    "tq_mse:b=4,norm=fp32",
                                    "kivi_v:b=2,group=32",
                                    "kivi_v:b=4,group=16",
                                    "q4_0",
                                    "q8_0",
                                    "rotate:q4_0",
                                    "rotate:kivi_v:b=2,group=32",
                                    "tq_mse:b=2.5",
                                    "tq_prod:b=3.5",
                                    "tq_mse:b=3,rescale=1",
                                    "split:tq_prod:b=3@32+tq_mse:b=2,rescale=1",
                                    "center:tq_mse:b=2.5",
                                    "center:int8"};
  for (int b = 1; b <= 8; ++b) {
    specs.push_back("tq_mse:b=" + std::to_string(b));
    specs.push_back("tq_prod:b=" + std::to_string(b));
  }
  return specs;
}

// The multi-query forms over rows [first, first + count): each head's query prepared from q
// (heads x dim), their scores (heads x count) and their accumulators (heads x accumulator_size())
// for weights w (heads x count).
struct MultiQueryRun {
  std::vector<std::unique_ptr<PreparedQuery>> owned;
  std::vector<const PreparedQuery *> prepared;
  std::vector<float> scores, accumulators;
};

MultiQueryRun run_multi_query(const VectorCodec &codec, const CodeBuffer &codes,
                              const float *q, const float *w, size_t heads,
                              size_t first, size_t count) {
  MultiQueryRun run;
  for (size_t h = 0; h < heads; ++h) {
    run.owned.push_back(codec.prepare(q + h * codec.dim()));
    run.prepared.push_back(run.owned.back().get());
  }
  run.scores.resize(heads * count);
  run.accumulators.assign(heads * codec_base(codec).accumulator_size(), 0.0f);
  codec_base(codec).scores_multi(run.prepared.data(), heads, codes, first, count,
                     run.scores.data(), count);
  codec_base(codec).accumulate_partial_multi(w, heads, count, codes, first, count,
                                 run.accumulators.data());
  return run;
}

} // namespace

// scores() and accumulate() work on codes directly; they must equal
// decode-then-dot.
TEST(Codec, QueryTimeOperationsEqualDecodeThenDot) {
  for (size_t dim : {96, 128}) {
    const size_t n = 70;
    auto x = testutil::gaussian_matrix(n, dim, 1, 3.0);
    auto q = testutil::gaussian_matrix(1, dim, 2);
    auto w = testutil::gaussian_matrix(1, n, 3);
    for (const auto &spec : all_specs()) {
      SCOPED_TRACE(spec + " dim=" + std::to_string(dim));
      auto codec = make_codec(spec, dim, 5);
      codec->calibrate(x.data(), n);
      auto codes = codec->make_buffer();
      codec->encode(x.data(), n, codes);
      ASSERT_EQ(codes.bytes(), n * codec->code_bytes());
      std::vector<float> decoded(n * dim), scores(n), sum(dim, 0.0f);
      codec->decode(codes, 0, n, decoded.data());
      codec->scores(*codec->prepare(q.data()), codes, 0, n, scores.data());
      double scale = 0;
      for (size_t i = 0; i < n; ++i)
        scale = std::max(scale, testutil::norm(q.data(), dim) *
                                    testutil::norm(&decoded[i * dim], dim));
      for (size_t i = 0; i < n; ++i)
        ASSERT_NEAR(scores[i], testutil::dot(q.data(), &decoded[i * dim], dim),
                    1e-5 * scale)
            << "row " << i;
      codec->accumulate(w.data(), codes, 0, n, sum.data());
      for (size_t j = 0; j < dim; ++j) {
        double expected = 0, magnitude = 0;
        for (size_t i = 0; i < n; ++i) {
          expected += w[i] * decoded[i * dim + j];
          magnitude += std::abs(w[i] * decoded[i * dim + j]);
        }
        ASSERT_NEAR(sum[j], expected, 1e-5 * magnitude + 1e-6)
            << "coordinate " << j;
      }
      // A sub-range of rows gives the matching slice, bit for bit (a row is scored the same wherever a
      // range starts).
      std::vector<float> part(10);
      codec->scores(*codec->prepare(q.data()), codes, 30, 10, part.data());
      for (size_t i = 0; i < 10; ++i)
        EXPECT_EQ(part[i], scores[30 + i]);
    }
  }
}

// The multi-query forms (a GQA group's heads reading each decoded row once)
// equal the one-query forms, for every codec, odd dimensions and row ranges
// included.
TEST(Codec, MultiQueryFormsEqualOneQueryForms) {
  testutil::for_each_target([] {
    for (size_t dim : {64, 100, 128}) {
      const size_t n = 75, heads = 5, first = 3, count = 70;
      auto x = testutil::gaussian_matrix(n, dim, 1, 3.0);
      auto q = testutil::gaussian_matrix(heads, dim, 2);
      auto w = testutil::gaussian_matrix(heads, count, 3);
      for (const auto &spec : all_specs()) {
        SCOPED_TRACE(spec + " dim=" + std::to_string(dim));
        auto codec = make_codec(spec, dim, 5);
        codec->calibrate(x.data(), n);
        auto codes = codec->make_buffer();
        codec->encode(x.data(), n, codes);
        const MultiQueryRun run = run_multi_query(
            *codec, codes, q.data(), w.data(), heads, first, count);
        const auto &prepared = run.prepared;
        const auto &multi = run.scores, &multi_acc = run.accumulators;
        const size_t width = codec_base(*codec).accumulator_size();
        for (size_t h = 0; h < heads; ++h) {
          std::vector<float> one(count), one_acc(width, 0.0f);
          codec->scores(*prepared[h], codes, first, count, one.data());
          double scale = 0;
          for (float s : one)
            scale = std::max(scale, std::abs(static_cast<double>(s)));
          for (size_t i = 0; i < count; ++i)
            ASSERT_NEAR(multi[h * count + i], one[i], 1e-5 * scale + 1e-6)
                << "head " << h << " row " << i;
          codec_base(*codec).accumulate_partial(w.data() + h * count, codes, first, count,
                                    one_acc.data());
          double magnitude = 0;
          for (float a : one_acc)
            magnitude = std::max(magnitude, std::abs(static_cast<double>(a)));
          for (size_t j = 0; j < width; ++j)
            ASSERT_NEAR(multi_acc[h * width + j], one_acc[j],
                        1e-5 * magnitude + 1e-6)
                << "head " << h << " coord " << j;
        }
      }
    }
  });
}

// The multi-query forms over [first, first + count) against the one-query forms, within
// `tolerance` relative to each value (plus 1); the weighted sums also within float rounding of
// their terms (1e-6 of sum_i |w_i x_ij|: thousands of terms summed in another order).
void expect_multi_equals_one(const VectorCodec &codec, const CodeBuffer &codes, const float *q, const float *w,
                             size_t heads, size_t first, size_t count, double tolerance) {
  const MultiQueryRun run = run_multi_query(codec, codes, q, w, heads, first, count);
  const size_t width = codec_base(codec).accumulator_size(), dim = codec.dim();
  std::vector<float> decoded(count * dim);
  codec.decode(codes, first, count, decoded.data());
  for (size_t h = 0; h < heads; ++h) {
    std::vector<float> one(count), one_acc(width, 0.0f);
    codec.scores(*run.prepared[h], codes, first, count, one.data());
    for (size_t i = 0; i < count; ++i)
      ASSERT_NEAR(run.scores[h * count + i], one[i], tolerance * (std::abs(one[i]) + 1.0)) << "head " << h << " row " << i;
    codec_base(codec).accumulate_partial(w + h * count, codes, first, count, one_acc.data());
    for (size_t j = 0; j < width; ++j) {
      double terms = 0.0;
      for (size_t i = 0; j < dim && i < count; ++i) terms += std::abs(double(w[h * count + i]) * decoded[i * dim + j]);
      ASSERT_NEAR(run.accumulators[h * width + j], one_acc[j], tolerance * (std::abs(one_acc[j]) + 1.0) + 1e-6 * terms)
          << "head " << h << " coord " << j;
    }
  }
}

// int8's multi-query forms read the rows in blocks of 1024 and scale each block's scores: a range
// over several blocks, starting inside one, equals the one-query forms.
TEST(Codec, Int8MultiQueryFormsAcrossBlocks) {
  const size_t dim = 128, n = 2600, heads = 4, first = 100, count = 2500;
  auto x = testutil::gaussian_matrix(n, dim, 11, 2.0);
  auto q = testutil::gaussian_matrix(heads, dim, 12);
  auto w = testutil::gaussian_matrix(heads, count, 13);
  auto codec = make_codec("int8", dim);
  auto codes = codec->make_buffer();
  codec->encode(x.data(), n, codes);
  expect_multi_equals_one(*codec, codes, q.data(), w.data(), heads, first, count, 1e-4);
}

// KIVI's and q4_0's multi-query forms read the levels in place (per group of rows for the keys,
// per channel group for values and q4_0, metadata converted per block of 1024 rows): over several
// blocks, with a channel group cut short (d = 100) and keys with a common offset, they equal the
// one-query forms, which decode to floats.
TEST(Codec, GroupQuantizerMultiQueryFormsReadLevelsInPlace) {
  const size_t n = 2624, heads = 4, first = 64, count = 2528;  // whole groups of 32 rows
  for (size_t dim : {100, 128}) {
    auto x = testutil::gaussian_matrix(n, dim, 14, 2.0);
    for (size_t i = 0; i < n * dim; ++i) x[i] += 1.5f;
    auto q = testutil::gaussian_matrix(heads, dim, 15);
    auto w = testutil::gaussian_matrix(heads, count, 16);
    // b = 3 and 8 besides 2 and 4 (8: the row kernels' scalar index rows); group 20 at b = 3:
    // channel groups that do not start on a byte, which take the decoding path.
    for (const std::string spec : {"kivi_k:b=2,group=32", "kivi_k:b=4,group=32", "kivi_k:b=8,group=32",
                                   "kivi_v:b=2,group=32", "kivi_v:b=4,group=16", "kivi_v:b=3,group=32",
                                   "kivi_v:b=3,group=20", "q4_0"}) {
      SCOPED_TRACE(spec + " dim=" + std::to_string(dim));
      auto codec = make_codec(spec, dim);
      auto codes = codec->make_buffer();
      codec->encode(x.data(), n, codes);
      expect_multi_equals_one(*codec, codes, q.data(), w.data(), heads, first, count, 1e-4);
    }
  }
}

// QJL signs in the integer kernels (1-bit indices into {-1, +1}, a norm as row factor), in
// TurboQuant prod and in QJL itself (with and without outlier channels): close to the float
// kernels, and the same bits on every target. At b = 1 the signs are prod's whole code, so a
// broken sign path cannot hide behind the scalar stage.
TEST(Codec, SignsInIntegersMatchFloatsOnEveryTarget) {
  const size_t dim = 128, n = 300, heads = 4;
  auto x = testutil::gaussian_matrix(n, dim, 21, 2.0);
  auto q = testutil::gaussian_matrix(heads, dim, 22);
  auto w = testutil::gaussian_matrix(heads, n, 23);
  for (const std::string spec : {"tq_prod:b=1", "tq_prod:b=3", "qjl:m=256", "qjl:m=200,sketch=hadamard",
                                 "qjl:m=128,outliers=8,m_out=64"}) {
    SCOPED_TRACE(spec);
    auto codec = make_codec(spec, dim, 5);
    codec->calibrate(x.data(), n);
    auto codes = codec->make_buffer();
    codec->encode(x.data(), n, codes);
    std::vector<std::unique_ptr<PreparedQuery>> owned;
    std::vector<const PreparedQuery *> prepared;
    for (size_t h = 0; h < heads; ++h) {
      owned.push_back(codec->prepare(q.data() + h * dim));
      prepared.push_back(owned.back().get());
    }
    const size_t width = codec_base(*codec).accumulator_size();
    const auto run = [&](Arithmetic arithmetic, std::vector<float> &scores, std::vector<float> &acc) {
      scores.assign(heads * n, 0.0f);
      acc.assign(heads * width, 0.0f);
      codec_base(*codec).scores_multi(prepared.data(), heads, codes, 0, n, scores.data(), n, arithmetic);
      codec_base(*codec).accumulate_partial_multi(w.data(), heads, n, codes, 0, n, acc.data(), arithmetic);
    };
    std::vector<float> float_scores, float_acc, int_scores, int_acc;
    run(Arithmetic::kFloat, float_scores, float_acc);
    run(Arithmetic::kInteger, int_scores, int_acc);
    // Relative to the scores' and sums' root mean square: the bytes carry the query within 0.4%
    // of its largest coordinate, the weights within 0.4% of a block's largest.
    const auto rms_distance = [](const std::vector<float> &a, const std::vector<float> &b) {
      double diff = 0, total = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        diff += (a[i] - b[i]) * double(a[i] - b[i]);
        total += double(a[i]) * a[i];
      }
      return std::sqrt(diff / total);
    };
    EXPECT_LT(rms_distance(int_scores, float_scores), 0.01);
    EXPECT_GT(rms_distance(int_scores, float_scores), 0.0) << "the integer path should be in use";
    EXPECT_LT(rms_distance(int_acc, float_acc), 0.01);
    EXPECT_GT(rms_distance(int_acc, float_acc), 0.0) << "the integer path should be in use";
    testutil::for_each_target([&] {
      std::vector<float> scores, acc;
      run(Arithmetic::kInteger, scores, acc);
      EXPECT_EQ(scores, int_scores);
      EXPECT_EQ(acc, int_acc);
    });
  }
}

TEST(Codec, CodeBytesAreExact) {
  const size_t d = 128;
  EXPECT_EQ(make_codec("fp16", d)->code_bytes(), 256u);
  EXPECT_EQ(make_codec("int8", d)->code_bytes(), 132u);
  EXPECT_EQ(make_codec("tq_mse:b=4", d)->code_bytes(),
            64u + 2); // indices + fp16 norm
  EXPECT_EQ(make_codec("tq_mse:b=3", d)->code_bytes(), 48u + 2);
  EXPECT_EQ(make_codec("tq_mse:b=4,norm=fp32", d)->code_bytes(), 64u + 4);
  EXPECT_EQ(make_codec("tq_prod:b=3", d)->code_bytes(),
            32u + 16 + 2 + 2); // 2-bit idx + signs + norm + gamma
  EXPECT_EQ(make_codec("tq_prod:b=1", d)->code_bytes(), 16u + 2 + 2);
  EXPECT_EQ(make_codec("qjl:m=256", d)->code_bytes(), 32u + 2);
  EXPECT_EQ(make_codec("qjl:m=256,outliers=8,m_out=256", d)->code_bytes(),
            32u + 32 + 2 + 2);
  EXPECT_EQ(make_codec("tq_mse:b=5", 100)->code_bytes(), 63u + 2);
  // The paper's split, 32 channels at b + 0.5 and 96 at b - 0.5, each part with its fp16 norm:
  // exactly 2.5 and 3.5 stored bits per value at d = 128.
  EXPECT_EQ(make_codec("tq_mse:b=2.5", d)->code_bytes() * 8, 2.5 * 128);
  EXPECT_EQ(make_codec("tq_mse:b=3.5", d)->code_bytes() * 8, 3.5 * 128);
  EXPECT_EQ(make_codec("tq_prod:b=2.5", d)->code_bytes(), (8u + 4 + 4) + (12u + 12 + 4));
  EXPECT_EQ(make_codec("tq_mse:b=3,rescale=1", d)->code_bytes(), 48u + 2);
}

TEST(Codec, MseReconstructionErrorMatchesDmseForAnyNorm) {
  const size_t d = 128, n = 400;
  auto x = testutil::gaussian_matrix(n, d, 9, 5.0);
  auto codec = make_codec("tq_mse:b=4", d);
  auto codes = codec->make_buffer();
  codec->encode(x.data(), n, codes);
  std::vector<float> decoded(n * d);
  codec->decode(codes, 0, n, decoded.data());
  double err = 0, total = 0;
  for (size_t i = 0; i < n * d; ++i) {
    err += (x[i] - decoded[i]) * (x[i] - decoded[i]);
    total += x[i] * x[i];
  }
  EXPECT_NEAR(err / total, 0.0093,
              0.0015); // D_mse(4) at d = 128 for vectors of any norm
}

TEST(Codec, SameSeedSameBytesForAnyThreadCount) {
  const size_t d = 200, n = 1000;
  auto x = testutil::gaussian_matrix(n, d, 4);
  for (const std::string spec :
       {"tq_mse:b=4", "tq_prod:b=3", "qjl:m=256", "tq_prod:b=2,sketch=gaussian",
        "tq_mse:b=3,rotation=haar"}) {
    std::vector<uint8_t> reference;
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      for (int run = 0; run < 2; ++run) {
        auto codec = make_codec(spec, d, 123);
        auto codes = codec->make_buffer();
        codec->encode(x.data(), n, codes);
        if (reference.empty())
          reference = codes.data();
        EXPECT_EQ(codes.data(), reference) << spec << " threads=" << threads;
      }
    }
    auto other = make_codec(spec, d, 124);
    auto codes = other->make_buffer();
    other->encode(x.data(), n, codes);
    EXPECT_NE(codes.data(), reference)
        << spec << ": a different seed should change the codes";
  }
  omp_set_num_threads(omp_get_num_procs());
}

TEST(Codec, GoldenCodeHashesArePlatformIndependent) {
  // The bytes for a fixed seed are part of the contract (same codes on every
  // machine).
  const size_t n = 64;
  struct Case {
    std::string spec;
    size_t d;
    uint64_t expected;
  };
  for (const auto &[spec, d, expected] :
       std::vector<Case>{{"tq_mse:b=4", 128, 536056107290420787ull},
                         {"tq_prod:b=3", 128, 10472755476797059699ull},
                         {"qjl:m=256", 128, 4536522786123705518ull},
                         {"tq_mse:b=3", 80, 16326019566453923473ull},
                         {"tq_prod:b=4", 200, 10115611177188785257ull}}) {
    auto x = testutil::gaussian_matrix(n, d, 77);
    // Every instruction set compiled in (scalar, SSE4, AVX2, AVX-512 where
    // present) gives the same bytes.
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      hwy::SetSupportedTargetsForTest(target);
      auto codec = make_codec(spec, d, 1);
      auto codes = codec->make_buffer();
      codec->encode(x.data(), n, codes);
      uint64_t hash = 1469598103934665603ull; // FNV-1a
      for (uint8_t byte : codes.data())
        hash = (hash ^ byte) * 1099511628211ull;
      EXPECT_EQ(hash, expected) << spec << " on " << hwy::TargetName(target);
    }
    hwy::SetSupportedTargetsForTest(0);
  }
}

TEST(Codec, GivenSquaredNormsEncodeTheSameBytes) {
  // The index passes the squared norms it computed while centring; codecs that normalize use them
  // instead of reading the rows again, and the codes must not change (others ignore them).
  const size_t n = 130, d = 96;
  const auto x = testutil::gaussian_matrix(n, d, 31);
  std::vector<float> squares(n);
  for (size_t i = 0; i < n; ++i) squares[i] = simd::sum_of_squares(x.data() + i * d, d);
  for (const std::string spec : {"tq_mse:b=4,rescale=1", "tq_prod:b=3", "tq_pca:b=4", "qjl:m=64", "int8"}) {
    auto codec = make_codec(spec, d, 1);
    auto with = codec->make_buffer(), without = codec->make_buffer();
    codec->encode(x.data(), n, with, squares.data());
    codec->encode(x.data(), n, without);
    EXPECT_EQ(with.data(), without.data()) << spec;
  }
}

TEST(Codec, ZeroVectorDecodesToZero) {
  for (const std::string spec : {"tq_mse:b=3", "tq_prod:b=3", "qjl:m=64",
                                 "int8", "qjl:m=64,outliers=4"}) {
    auto codec = make_codec(spec, 64);
    std::vector<float> zero(64, 0.0f), decoded(64, 1.0f), q(64, 1.0f);
    auto codes = codec->make_buffer();
    codec->encode(zero.data(), 1, codes);
    codec->decode(codes, 0, 1, decoded.data());
    for (float v : decoded)
      EXPECT_EQ(v, 0.0f) << spec;
    float score = 1.0f;
    codec->scores(*codec->prepare(q.data()), codes, 0, 1, &score);
    EXPECT_EQ(score, 0.0f) << spec;
  }
}

TEST(Codec, NonFiniteInputIsRefusedNamingRowAndColumn) {
  for (const std::string spec : {"tq_prod:b=3", "tq_mse:b=4", "qjl:m=32",
                                 "qjl:m=32,outliers=2", "int8", "fp16"}) {
    auto codec = make_codec(spec, 16);
    auto x = testutil::gaussian_matrix(200, 16, 1);
    auto codes = codec->make_buffer();
    codec->encode(x.data(), 1, codes);
    x[130 * 16 + 5] = NAN; // in the third block of 64 rows
    try {
      codec->encode(x.data(), 200, codes);
      FAIL() << "NaN accepted by " << spec;
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find("row 130 column 5 is NaN"),
                std::string::npos)
          << e.what();
    }
    x[130 * 16 + 5] = INFINITY;
    EXPECT_THROW(codec->encode(x.data(), 200, codes), Error) << spec;
    EXPECT_EQ(codes.size(), 1u) << "a refused encode must not append rows";
    std::vector<float> q(16, 0.0f);
    q[3] = -INFINITY;
    EXPECT_THROW(codec->prepare(q.data()), Error) << spec;
  }
}

TEST(Codec, NormBeyondFloatRangeIsRefused) {
  auto codec = make_codec("tq_mse:b=2,norm=fp32", 16);
  std::vector<float> x(16,
                       3e38f); // finite values, squares and norm beyond float
  auto codes = codec->make_buffer();
  try {
    codec->encode(x.data(), 1, codes);
    FAIL() << "overflowing norm accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("row 0 has norm"), std::string::npos)
        << e.what();
  }
  std::vector<float> y(16, 0.0f);
  y[0] = 1e30f; // the square overflows, the norm does not
  codec->encode(y.data(), 1, codes);
  std::vector<float> back(16);
  codec->decode(codes, 0, 1, back.data());
  double squares = 0.0;
  for (float v : back)
    squares += static_cast<double>(v) * v;
  EXPECT_NEAR(std::sqrt(squares), 1e30, 1e30 * 0.2);
}

TEST(Codec, NormBeyondFp16IsRefusedWithoutLosingData) {
  auto codec = make_codec("tq_mse:b=2", 256);
  std::vector<float> x(256 * 200, 1.0f);
  x[150 * 256] = 1e5f; // row 150 has norm > 65504
  auto codes = codec->make_buffer();
  try {
    codec->encode(x.data(), 200, codes);
    FAIL() << "overflow accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("norm=fp32"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(codes.size(), 0u);
  auto wide = make_codec("tq_mse:b=2,norm=fp32", 256);
  auto wide_codes = wide->make_buffer();
  wide->encode(x.data(), 200, wide_codes);
  EXPECT_EQ(wide_codes.size(), 200u);
}

TEST(Codec, BadSpecsGetClearErrors) {
  auto message = [](const std::string &spec, size_t dim = 128) {
    return testutil::error_of([&] { make_codec(spec, dim); });
  };
  EXPECT_NE(message("pq:b=4").find("valid codecs"), std::string::npos);
  EXPECT_NE(message("tq_mse:b=9").find("out of range; expected 1..8"),
            std::string::npos);
  EXPECT_NE(message("tq_mse:b=0").find("out of range"), std::string::npos);
  EXPECT_NE(message("tq_mse").find("b (bits per coordinate, 1..8) is required"),
            std::string::npos);
  EXPECT_NE(message("tq_mse:b=x").find("not an integer"), std::string::npos);
  EXPECT_NE(message("qjl:m=0").find("m=0 out of range"), std::string::npos);
  EXPECT_NE(message("tq_mse:b=3,speed=11").find("unknown parameter 'speed'"),
            std::string::npos);
  EXPECT_NE(message("tq_prod:b=3,sketch=sparse")
                .find("expected one of hadamard, gaussian, orthogonal"),
            std::string::npos);
  EXPECT_NE(message("tq_mse:b=3", 0).find("dimension must be in 1..8192"),
            std::string::npos);
  EXPECT_NE(message("qjl:m=64,outliers=128").find("out of range"),
            std::string::npos);
  EXPECT_NE(message("tq_mse:b=2.7").find("integer 1..8 or a half 1.5..7.5"), std::string::npos);
  EXPECT_NE(message("tq_mse:b=8.5").find("integer 1..8 or a half 1.5..7.5"), std::string::npos);
  EXPECT_NE(message("tq_prod:b=3,rescale=1").find("unknown parameter 'rescale'"), std::string::npos);
  EXPECT_NE(message("split:tq_mse:b=3@32").find("at least two parts"), std::string::npos);
  EXPECT_NE(message("split:fp16@32+tq_mse:b=2").find("must be tq_mse or tq_prod"), std::string::npos);
  EXPECT_NE(message("split:tq_mse:b=3@200+tq_mse:b=2").find("leaving none for the last"), std::string::npos);
  EXPECT_NE(message("split:tq_mse:b=3+tq_mse:b=2").find("only the last part may leave out"), std::string::npos);
  EXPECT_NE(message("split:tq_mse:b=3@1+tq_mse:b=2").find("needs at least 2"), std::string::npos);
  EXPECT_NE(message("split:tq_mse:b=3@32+tq_mse:b=2@32").find("64 channels in all, the dimension is 128"),
            std::string::npos);
  EXPECT_NE(message("split:tq_mse:b=3@x%+tq_mse:b=2").find("is not N or P%"), std::string::npos);
  EXPECT_NE(message("split:tq_mse:b=2.5@64+tq_mse:b=2").find("nest no splits"), std::string::npos);
}

TEST(Codec, MisuseAcrossCodecsAndRangesIsRefused) {
  auto a = make_codec("tq_mse:b=4", 32), b = make_codec("tq_mse:b=4", 32);
  auto x = testutil::gaussian_matrix(4, 32, 1);
  auto codes = a->make_buffer();
  a->encode(x.data(), 4, codes);
  std::vector<float> out(8 * 32);
  EXPECT_THROW(a->decode(codes, 2, 3, out.data()), Error);
  EXPECT_THROW(b->scores(*a->prepare(x.data()), codes, 0, 4, out.data()),
               Error);
  auto other = make_codec("tq_mse:b=3", 32);
  EXPECT_THROW(other->decode(codes, 0, 1, out.data()), Error);
  auto other_codes = other->make_buffer();
  EXPECT_THROW(a->encode(x.data(), 1, other_codes), Error);
}

TEST(Qjl, CalibrationPicksTheLoudChannels) {
  const size_t d = 64, n = 300;
  auto x = testutil::gaussian_matrix(n, d, 3);
  for (size_t i = 0; i < n; ++i) {
    x[i * d + 7] *= 20.0f;
    x[i * d + 40] *= 15.0f;
  }
  Qjl codec(d, QjlOptions{.rows = 128, .outliers = 2});
  codec.calibrate(x.data(), n);
  EXPECT_EQ(codec.outlier_channels(), (std::vector<size_t>{7, 40}));
}

TEST(ChannelSplit, CalibrationGivesTheLoudChannelsTheMoreBits) {
  // Keys with a few loud channels (as LLM keys have): the split that gives them 3 bits beats
  // plain 2-bit TurboQuant by a wide margin, and is refused no state it saved itself.
  const size_t d = 128, n = 400;
  auto x = testutil::gaussian_matrix(n, d, 5);
  for (size_t i = 0; i < n; ++i)
    for (size_t c : {3, 17, 60, 61, 99}) x[i * d + c] *= 12.0f;
  auto split = make_codec("tq_mse:b=2.5", d, 9);
  ASSERT_TRUE(split->calibrated_by_data());
  split->calibrate(x.data(), n);
  const auto& channels = dynamic_cast<const ChannelSplit&>(*split).part_channels();
  ASSERT_EQ(channels[0].size(), 32u);
  for (size_t c : {3, 17, 60, 61, 99})
    EXPECT_TRUE(std::binary_search(channels[0].begin(), channels[0].end(), c)) << c;
  auto relative_error = [&](const VectorCodec& codec) {
    auto codes = codec.make_buffer();
    codec.encode(x.data(), n, codes);
    std::vector<float> decoded(n * d);
    codec.decode(codes, 0, n, decoded.data());
    double error = 0, total = 0;
    for (size_t i = 0; i < n * d; ++i) {
      error += (decoded[i] - x[i]) * (decoded[i] - x[i]);
      total += x[i] * x[i];
    }
    return error / total;
  };
  const double split_error = relative_error(*split);
  EXPECT_LT(split_error, 0.6 * relative_error(*make_codec("tq_mse:b=2", d, 9)));
  auto uncalibrated = make_codec("tq_mse:b=2.5", d, 9);
  EXPECT_GT(relative_error(*uncalibrated), 1.5 * split_error);

  // The state restores the choice; bad states are refused.
  const auto state = split->calibration();
  EXPECT_EQ(state.size(), 64u);
  uncalibrated->set_calibration(state);
  EXPECT_EQ(relative_error(*uncalibrated), split_error);
  EXPECT_THROW(uncalibrated->set_calibration(std::vector<uint8_t>(10)), Error);
  auto duplicated = state;
  duplicated[2] = duplicated[0], duplicated[3] = duplicated[1];
  EXPECT_THROW(uncalibrated->set_calibration(duplicated), Error);
  EXPECT_THROW(make_codec("tq_mse:b=3", d)->set_calibration(state), Error);
}

// The per-call checks format the codec's spec only when they fail (SpecOf): the messages still
// name it in full.
TEST(Codec, CheckMessagesNameTheCodecSpec) {
  const size_t dim = 64;
  auto codec = codec_base(make_codec("tq_mse:b=3", dim, 1));
  auto other = make_codec("tq_mse:b=3", dim, 2);
  auto x = testutil::gaussian_matrix(4, dim, 3);
  auto codes = codec->make_buffer();
  codec->encode(x.data(), 4, codes);
  const auto foreign = other->prepare(x.data());
  const PreparedQuery* heads[] = {foreign.get()};
  std::vector<float> out(4);
  const auto message_of = [](const auto& call) {
    try {
      call();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string spec = codec->spec();
  EXPECT_NE(spec.find("seed=1"), std::string::npos) << spec;
  const std::string prepared = message_of([&] { codec->scores_multi(heads, 1, codes, 0, 4, out.data(), 4); });
  EXPECT_NE(prepared.find("prepared by a different codec than " + spec), std::string::npos) << prepared;
  const std::string range = message_of([&] {
    const auto own = codec->prepare(x.data());
    const PreparedQuery* mine[] = {own.get()};
    codec->scores_multi(mine, 1, codes, 2, 4, out.data(), 4);
  });
  EXPECT_NE(range.find("rows [2, 6) out of range"), std::string::npos) << range;
  CodeBuffer wrong(codec->code_bytes() + 1);
  wrong.resize(4);
  const std::string buffer = message_of([&] {
    const auto own = codec->prepare(x.data());
    const PreparedQuery* mine[] = {own.get()};
    codec->scores_multi(mine, 1, wrong, 0, 4, out.data(), 4);
  });
  EXPECT_NE(buffer.find("but codec " + spec + " writes"), std::string::npos) << buffer;
}

// Centred KIVI keys decode whole groups (the fuzzer's center:kivi_k:b=1,group=2 read one row's
// share of a group's scales past the row): the inner codec's rows plus the mean.
TEST(CenteredCodec, GroupedInnerRowsDecodeAsTheInnerCodecPlusTheMean) {
  for (const char* inner_spec : {"kivi_k:b=1,group=2", "kivi_k:b=2,group=32"}) {
    SCOPED_TRACE(inner_spec);
    const size_t dim = 24;
    auto centred = make_codec(std::string("center:") + inner_spec, dim, 1);
    const size_t n = 2 * centred->row_group();
    const auto rows = testutil::gaussian_matrix(n, dim, 5);
    centred->calibrate(rows.data(), n);
    CodeBuffer codes = centred->make_buffer();
    centred->encode(rows.data(), n, codes);
    std::vector<float> decoded(n * dim);
    centred->decode(codes, 0, n, decoded.data());
    const auto* center = dynamic_cast<const CenteredCodec*>(centred.get());
    ASSERT_NE(center, nullptr);
    auto inner = make_codec(inner_spec, dim, 1);
    std::vector<float> shifted(rows);
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < dim; ++j) shifted[i * dim + j] -= center->mean()[j];
    CodeBuffer inner_codes = inner->make_buffer();
    inner->encode(shifted.data(), n, inner_codes);
    EXPECT_EQ(inner_codes.data(), codes.data());
    std::vector<float> inner_decoded(n * dim);
    inner->decode(inner_codes, 0, n, inner_decoded.data());
    for (size_t i = 0; i < n * dim; ++i) ASSERT_FLOAT_EQ(decoded[i], inner_decoded[i] + center->mean()[i % dim]);
  }
}
