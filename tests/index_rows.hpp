// Rows of random b-bit indices for the index kernels' tests (int_index_test, quad_rows_test).
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "kvsketch/bitpack.hpp"
#include "kvsketch/half.hpp"
#include "kvsketch/random.hpp"
#include "simd/row_kernels.hpp"

namespace kvsketch::testutil {

// Rows of random b-bit indices with a few bytes after each (as a codec's norms).
struct IndexRowsData {
  std::vector<uint8_t> codes;
  simd::RowSource source;
  IndexRowsData(size_t n, size_t dim, int bits, const float* table, uint64_t seed) {
    const size_t stride = packed_bytes(dim, bits) + 3;
    codes.assign(n * stride, 0);
    RandomStream stream(seed, StreamPurpose::kTest);
    std::vector<uint8_t> index(dim);
    for (size_t i = 0; i < n; ++i) {
      for (auto& v : index) v = static_cast<uint8_t>(stream.next_u64() >> (64 - bits));
      pack_bits(index.data(), dim, bits, codes.data() + i * stride);
      // A positive fp16 factor after the indices (a norm), as TurboQuant stores it.
      const uint16_t factor = float_to_half(static_cast<float>(0.5 + stream.uniform()));
      std::memcpy(codes.data() + i * stride + packed_bytes(dim, bits), &factor, sizeof(factor));
      codes[i * stride + stride - 1] = 0xFF;
    }
    source = {simd::RowFormat::kIndex, codes.data(), stride, dim, bits, table, stride};
  }
};

}  // namespace kvsketch::testutil
