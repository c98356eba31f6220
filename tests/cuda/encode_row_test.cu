// The GPU encode's row function (cuda/encode_row.cuh) run on the CPU, its lanes one after
// another: the codes must be the CPU codecs' bits, rows that cannot be encoded refused as the CPU
// refuses them. The device runs the same function (CudaEncode.GivesTheCpuCodecsBits checks it
// there).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/encode_row.cuh"
#include "kvsketch/codec.hpp"
#include "kvsketch/error.hpp"
#include "test_rows.hpp"

namespace kvsketch::cuda::detail {
namespace {

using kvsketch::cuda::rows_of_every_kind;

TEST(CudaEncodeRow, GivesTheCpuCodecsBits) {
  for (size_t dim : {64, 128, 256})
    for (const char* spec : {"tq_mse:b=2", "tq_mse:b=3", "tq_mse:b=4", "tq_mse:b=3,rescale=1", "tq_mse:b=4,rescale=1",
                             "tq_mse:b=2,rounds=3", "tq_mse:b=3,codebook=gaussian", "tq_prod:b=2", "tq_prod:b=3",
                             "tq_prod:b=4", "tq_prod:b=3,rounds=3", "tq_prod:b=3,codebook=gaussian", "qjl",
                             "qjl:sketch=gaussian", "qjl:sketch=hadamard", "qjl:sketch=hadamard,rounds=3"})
      for (uint64_t seed : {1u, 77u}) {
        const auto codec = make_codec(spec, dim, seed);
        std::vector<float> storage;
        const PartView part = part_view_on_host({codec.get()}, storage);
        const size_t n = 300;
        const std::vector<float> rows = rows_of_every_kind(n, dim, seed + dim);
        CodeBuffer expected(codec->code_bytes());
        codec->encode(rows.data(), n, expected);
        ASSERT_EQ(static_cast<size_t>(part.packed_bytes) + 2 * part.factors(), codec->code_bytes());
        static EncodeScratch scratch;
        std::vector<uint8_t> got(codec->code_bytes());
        uint8_t* norm = got.data() + part.packed_bytes;
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(encode_row(part, 0, rows.data() + i * dim, scratch, got.data(), norm, norm + 2, 0), kEncoded);
          ASSERT_EQ(std::memcmp(got.data(), expected.row(i), got.size()), 0)
              << spec << " dim " << dim << " seed " << seed << ": row " << i << " differs";
        }
      }
}

TEST(CudaEncodeRow, RefusesWhatTheCpuRefuses) {
  const auto codec = make_codec("tq_mse:b=3", 128, 3);
  std::vector<float> storage;
  const PartView part = part_view_on_host({codec.get()}, storage);
  static EncodeScratch scratch;
  std::vector<uint8_t> code(codec->code_bytes());
  uint8_t unused_gamma[2];  // tq_mse rows have none
  std::vector<float> row(128, 1.0f);
  row[9] = std::nanf("");
  EXPECT_EQ(encode_row(part, 0, row.data(), scratch, code.data(), code.data() + 48, unused_gamma, 0), kNotFinite);
  CodeBuffer buffer(codec->code_bytes());
  EXPECT_THROW(codec->encode(row.data(), 1, buffer), Error);
  std::fill(row.begin(), row.end(), 1e4f);  // norm 1.1e5: beyond fp16
  EXPECT_EQ(encode_row(part, 0, row.data(), scratch, code.data(), code.data() + 48, unused_gamma, 0), kBeyondHalf);
  EXPECT_THROW(codec->encode(row.data(), 1, buffer), Error);
  std::fill(row.begin(), row.end(), 1e38f);  // squares overflow; the norm is beyond float
  EXPECT_EQ(encode_row(part, 0, row.data(), scratch, code.data(), code.data() + 48, unused_gamma, 0), kBeyondFloat);
  EXPECT_THROW(codec->encode(row.data(), 1, buffer), Error);
}

}  // namespace
}  // namespace kvsketch::cuda::detail
