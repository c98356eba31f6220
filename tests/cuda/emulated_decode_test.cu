// The decode kernels' own bodies run on the CPU (kernel_emulator.hpp) over a page store filled
// from a PagedKVCache's codecs, against the cache's decode of the same tokens: the whole kernel
// (staging, fragments, online softmax, the warps' merge, the split over blocks, the finish with
// its exact sinks and window) checked without a GPU. The device runs the same code
// (CudaDecode.EqualsTheCpuCacheOnTheSameCodes checks it there).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "host_planes.hpp"
#include "kernel_emulator.hpp"
#include "kvsketch/codec.hpp"
#include "kvsketch/half.hpp"
#include "mirrored_cache.hpp"

namespace kvsketch::cuda {
namespace {

// One role's codecs and their planes: every body token of every head encoded by its head's codec.
struct RolePlanes {
  detail::HostTables storage;
  detail::PartView view;
  std::unique_ptr<HostPlanes> planes;

  RolePlanes(const MirroredCache& m, const DeviceMirror& mirror, bool keys) {
    std::vector<const VectorCodec*> codecs;
    for (size_t h = 0; h < m.kv_heads; ++h)
      codecs.push_back(keys ? &m.cache.key_codec(0, h) : &m.cache.value_codec(0, h));
    view = detail::part_view_on_host(codecs, storage);
    planes = std::make_unique<HostPlanes>(view, mirror.pages * m.kv_heads * mirror.page_tokens);
    // Encoded as encode_into_pages encodes on the device (the CPU codecs' bits: CudaEncodeRow).
    const std::vector<float>& rows = keys ? mirror.body_keys : mirror.body_values;
    std::vector<uint8_t> code(codecs.front()->code_bytes());
    for (size_t i = 0; i < mirror.slots.size(); ++i)
      for (size_t h = 0; h < m.kv_heads; ++h) {
        EXPECT_EQ(encode_cpu_row(view, static_cast<int>(h), rows.data() + (i * m.kv_heads + h) * m.dim, code.data()),
                  detail::kEncoded);
        const size_t page = mirror.slots[i] / mirror.page_tokens, offset = mirror.slots[i] % mirror.page_tokens;
        planes->store(code.data(), (page * m.kv_heads + h) * mirror.page_tokens + offset);
      }
  }
};

// The fp16 body's planes: each body token's halves (the cache's fp16 rows).
struct HalfPlanes {
  std::vector<uint4> keys, values;  // 16-byte aligned

  HalfPlanes(const MirroredCache& m, const DeviceMirror& mirror)
      : keys(mirror.pages * m.kv_heads * mirror.page_tokens * m.dim * 2 / 16 + 1), values(keys.size()) {
    auto* key_halves = reinterpret_cast<uint16_t*>(keys.data());
    auto* value_halves = reinterpret_cast<uint16_t*>(values.data());
    for (size_t i = 0; i < mirror.slots.size(); ++i)
      for (size_t h = 0; h < m.kv_heads; ++h) {
        const size_t page = mirror.slots[i] / mirror.page_tokens, offset = mirror.slots[i] % mirror.page_tokens;
        const size_t plane = (page * m.kv_heads + h) * mirror.page_tokens + offset;
        for (size_t j = 0; j < m.dim; ++j) {
          key_halves[plane * m.dim + j] = float_to_half(mirror.body_keys[(i * m.kv_heads + h) * m.dim + j]);
          value_halves[plane * m.dim + j] = float_to_half(mirror.body_values[(i * m.kv_heads + h) * m.dim + j]);
        }
      }
  }
};

template <int D, int KB, int VB, bool SIGNS>
void check_emulated(const DecodeCase& c, const std::vector<size_t>& lengths) {
  const MirroredCache m(c.kv_heads, c.dim, c.q_heads, c.policy, lengths, 11);
  const DeviceMirror mirror(m, c.page);
  const size_t batch = m.lengths.size();
  const CpuDecode cpu(m);

  detail::BodyView body;
  std::unique_ptr<RolePlanes> keys, values;
  std::unique_ptr<HalfPlanes> halves;
  if constexpr (KB == detail::kHalfBits) {  // decode_attention_fp16's body
    halves = std::make_unique<HalfPlanes>(m, mirror);
    body.key_bits = body.value_bits = detail::kHalfBits;
    body.key_indices = reinterpret_cast<const uint8_t*>(halves->keys.data());
    body.value_indices = reinterpret_cast<const uint8_t*>(halves->values.data());
  } else {
    keys = std::make_unique<RolePlanes>(m, mirror, true);
    values = std::make_unique<RolePlanes>(m, mirror, false);
    ASSERT_EQ(keys->view.layout(), KB) << c.policy;
    ASSERT_EQ(values->view.layout(), VB) << c.policy;
    detail::bind_keys(keys->view, body);
    detail::bind_values(values->view, body);
    body.key_indices = keys->planes->indices();
    body.key_norms = keys->planes->norms.data();
    body.key_gammas = keys->planes->gammas.data();
    body.value_indices = values->planes->indices();
    body.value_norms = values->planes->norms.data();
  }
  body.page_tokens = static_cast<int>(c.page);
  detail::BatchView view;
  view.batch = static_cast<int>(batch);
  view.block_tables = mirror.tables.data();
  view.max_pages = static_cast<int>(mirror.max_pages);
  view.body_tokens = mirror.body.data();
  view.max_body_tokens = static_cast<int>(mirror.max_body);
  view.exact_keys = mirror.exact_keys.data();
  view.exact_values = mirror.exact_values.data();
  view.exact_tokens = mirror.exact.data();
  view.exact_capacity = static_cast<int>(mirror.capacity);
  detail::DecodeShape shape;
  shape.dim = D;
  shape.kv_heads = static_cast<int>(c.kv_heads);
  shape.group = static_cast<int>(c.q_heads / c.kv_heads);
  shape.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));

  std::vector<float> got(cpu.queries.size()), got_lse(batch * c.q_heads);
  emulator::decode<D, KB, VB, SIGNS>(shape, body, view, cpu.queries.data(), got.data(), got_lse.data());
  cpu.expect_close("emulated", c.policy, m, got, got_lse);
}

// Lengths with no body, a body shorter than a tile, several tiles and pages, and (at 700) more
// than one split unit.
const std::vector<size_t> kLengths = {3, 37, 300, 700};

TEST(CudaEmulatedDecode, TurboQuantEqualsTheCpuCache) {
  check_emulated<128, 3, 3, false>({2, 128, 8, "tq_mse:b=3|sinks=4|window=32|block=16", 64}, kLengths);
  check_emulated<64, 4, 2, false>({1, 64, 3, "tq_mse:b=4,rescale=1|tq_mse:b=2|sinks=0|window=16|block=16", 48},
                                  kLengths);
}

TEST(CudaEmulatedDecode, Fp16BodyEqualsTheCpuCache) {
  check_emulated<128, detail::kHalfBits, detail::kHalfBits, false>(
      {2, 128, 6, "fp16|sinks=4|window=32|block=16", 64}, kLengths);
}

TEST(CudaEmulatedDecode, ProdAndQjlKeysEqualTheCpuCache) {
  check_emulated<128, 2, 3, true>({2, 128, 4, "tq_prod:b=3|tq_mse:b=3|sinks=4|window=32|block=16", 64}, kLengths);
  check_emulated<128, 0, 4, true>({1, 128, 2, "qjl|tq_mse:b=4|sinks=4|window=16|block=16", 32}, kLengths);
}

TEST(CudaEmulatedDecode, CentredCodecsEqualTheCpuCache) {
  check_emulated<128, 4, 3, false>(
      {2, 128, 8, "center:tq_mse:b=4,rescale=1|center:tq_mse:b=3,rescale=1|sinks=4|window=32|block=16", 64},
      kLengths);
  check_emulated<128, detail::kSplit35, detail::kSplit35, false>(
      {1, 128, 4, "center:tq_mse:b=3.5,rescale=1|sinks=4|window=16|block=16", 64}, kLengths);
}

TEST(CudaEmulatedDecode, ChannelSplitsEqualTheCpuCache) {
  check_emulated<128, detail::kSplit25, detail::kSplit25, false>(
      {2, 128, 4, "tq_mse:b=2.5|tq_mse:b=2.5|sinks=4|window=32|block=16", 64}, kLengths);
  check_emulated<128, detail::kSplit35, detail::kSplit25, false>(
      {1, 128, 16, "tq_mse:b=3.5,rescale=1|tq_mse:b=2.5|sinks=4|window=16|block=16", 128}, kLengths);
}

}  // namespace
}  // namespace kvsketch::cuda
