// The GPU encode's row function (cuda/encode_row.cuh) run on the CPU, its lanes one after
// another: the codes must be the CPU codecs' bits, rows that cannot be encoded refused as the CPU
// refuses them. The device runs the same function (CudaEncode.GivesTheCpuCodecsBits checks it
// there).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/encode_row.cuh"
#include "cuda/encode_targets.cuh"
#include "kvsketch/codec.hpp"
#include "kvsketch/error.hpp"
#include "host_planes.hpp"
#include "test_rows.hpp"

namespace kvsketch::cuda::detail {
namespace {

using kvsketch::cuda::rows_of_every_kind;

TEST(CudaEncodeRow, GivesTheCpuCodecsBits) {
  for (size_t dim : {64, 128, 256})
    for (const char* spec : {"tq_mse:b=2", "tq_mse:b=3", "tq_mse:b=4", "tq_mse:b=3,rescale=1", "tq_mse:b=4,rescale=1",
                             "tq_mse:b=2,rounds=3", "tq_mse:b=3,codebook=gaussian", "tq_prod:b=2", "tq_prod:b=3",
                             "tq_prod:b=4", "tq_prod:b=3,rounds=3", "tq_prod:b=3,codebook=gaussian", "qjl",
                             "qjl:sketch=gaussian", "qjl:sketch=hadamard", "qjl:sketch=hadamard,rounds=3",
                             "tq_mse:b=2.5", "tq_mse:b=3.5", "tq_mse:b=2.5,rescale=1", "center:tq_mse:b=3,rescale=1",
                             "center:tq_prod:b=3", "center:tq_mse:b=3.5,rescale=1"})
      for (uint64_t seed : {1u, 77u}) {
        const bool split = std::string(spec).find(".5") != std::string::npos;
        if (split && dim == 64) continue;  // refused: parts of 16 channels
        const auto codec = make_codec(spec, dim, seed);
        const size_t n = 300;
        const std::vector<float> rows = rows_of_every_kind(n, dim, seed + dim);
        codec->calibrate(rows.data(), n);  // a split's loudest channels to its first part
        HostTables storage;
        const PartView part = part_view_on_host({codec.get()}, storage);
        CodeBuffer expected(codec->code_bytes());
        codec->encode(rows.data(), n, expected);
        ASSERT_EQ(static_cast<size_t>(part.packed_bytes) + 2 * part.factors(), codec->code_bytes());
        std::vector<uint8_t> got(codec->code_bytes());
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(encode_cpu_row(part, 0, rows.data() + i * dim, got.data()), kEncoded);
          ASSERT_EQ(std::memcmp(got.data(), expected.row(i), got.size()), 0)
              << spec << " dim " << dim << " seed " << seed << ": row " << i << " differs";
        }
      }
}

TEST(CudaEncodeRow, SplitsGatherTheirCalibratedChannels) {
  const auto codec = make_codec("tq_mse:b=2.5", 128, 4);
  const std::vector<float> rows = rows_of_every_kind(200, 128, 9);
  codec->calibrate(rows.data(), 200);
  HostTables storage;
  const PartView part = part_view_on_host({codec.get()}, storage);
  ASSERT_EQ(part.part_count, 2);
  ASSERT_EQ(part.parts[0].rotation.dim, 32);
  // The calibration moved channels: the list is a permutation, not the identity.
  std::vector<uint16_t> sorted(storage.channels.begin(), storage.channels.end());
  EXPECT_FALSE(std::is_sorted(sorted.begin(), sorted.end()));
  std::sort(sorted.begin(), sorted.end());
  for (size_t j = 0; j < sorted.size(); ++j) ASSERT_EQ(sorted[j], j);
}

// The planes encode_into_pages writes (each part through target_of) are those store_rows writes
// from the CPU rows (store_row, which fills the planes the decode tests read), byte for byte;
// encode_rows' rows are the CPU codec's.
TEST(CudaEncodeRow, PageTargetsAreThePlanesDecodeReads) {
  const size_t dim = 128, n = 40, page_tokens = 16, kv_heads = 2, head = 1;
  for (const char* spec :
       {"tq_mse:b=3", "tq_prod:b=3", "qjl", "tq_mse:b=2.5", "tq_mse:b=3.5,rescale=1", "center:tq_mse:b=2.5,rescale=1"}) {
    const auto codec = make_codec(spec, dim, 8);
    const std::vector<float> rows = rows_of_every_kind(n, dim, 12);
    codec->calibrate(rows.data(), n);
    HostTables storage;
    const PartView view = part_view_on_host({codec.get(), codec.get()}, storage);  // head 1: the same codec
    CodeBuffer cpu_rows(codec->code_bytes());
    codec->encode(rows.data(), n, cpu_rows);
    const size_t slots = 4 * page_tokens * kv_heads;
    std::vector<int64_t> slot_of(n);
    for (size_t i = 0; i < n; ++i) slot_of[i] = static_cast<int64_t>((i * 7 + 3) % (4 * page_tokens));
    HostPlanes expected(view, slots), encoded(view, slots);
    const EncodeTarget encode_target = encoded.target(slot_of.data(), page_tokens, kv_heads, 4 * page_tokens);
    static EncodeScratch scratch;
    for (size_t i = 0; i < n; ++i) {
      const size_t plane = plane_of(encode_target, head, slot_of[i]);
      expected.store(cpu_rows.row(i), plane);
      for (int p = 0; p < view.part_count; ++p) {
        uint8_t *indices, *norm, *gamma;
        target_of(encode_target, view, p, head, i, &indices, &norm, &gamma);
        ASSERT_EQ(encode_row(view, p, head, rows.data() + i * dim, scratch, indices, norm, gamma, 0), kEncoded);
      }
    }
    // Rows mode (encode_rows): the CPU rows themselves.
    std::vector<uint8_t> row_bytes(codec->code_bytes());
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(encode_cpu_row(view, static_cast<int>(head), rows.data() + i * dim, row_bytes.data()), kEncoded);
      ASSERT_EQ(std::memcmp(row_bytes.data(), cpu_rows.row(i), codec->code_bytes()), 0)
          << spec << ": encode_rows' row " << i;
    }
    EXPECT_EQ(std::memcmp(encoded.packed.data(), expected.packed.data(), expected.packed.size() * 16), 0)
        << spec << ": encode's index plane";
    EXPECT_EQ(encoded.norms, expected.norms) << spec << ": encode's norms";
    EXPECT_EQ(encoded.gammas, expected.gammas) << spec << ": encode's gammas";
  }
}

TEST(CudaEncodeRow, RefusesWhatTheCpuRefuses) {
  const auto codec = make_codec("tq_mse:b=3", 128, 3);
  HostTables storage;
  const PartView part = part_view_on_host({codec.get()}, storage);
  static EncodeScratch scratch;
  std::vector<uint8_t> code(codec->code_bytes());
  uint8_t unused_gamma[2];  // tq_mse rows have none
  std::vector<float> row(128, 1.0f);
  row[9] = std::nanf("");
  EXPECT_EQ(encode_row(part, 0, 0, row.data(), scratch, code.data(), code.data() + 48, unused_gamma, 0), kNotFinite);
  CodeBuffer buffer(codec->code_bytes());
  EXPECT_THROW(codec->encode(row.data(), 1, buffer), Error);
  std::fill(row.begin(), row.end(), 1e4f);  // norm 1.1e5: beyond fp16
  EXPECT_EQ(encode_row(part, 0, 0, row.data(), scratch, code.data(), code.data() + 48, unused_gamma, 0), kBeyondHalf);
  EXPECT_THROW(codec->encode(row.data(), 1, buffer), Error);
  std::fill(row.begin(), row.end(), 1e38f);  // squares overflow; the norm is beyond float
  EXPECT_EQ(encode_row(part, 0, 0, row.data(), scratch, code.data(), code.data() + 48, unused_gamma, 0), kBeyondFloat);
  EXPECT_THROW(codec->encode(row.data(), 1, buffer), Error);
}

}  // namespace
}  // namespace kvsketch::cuda::detail
