// Packing of b-bit indices (b = 1..8) into an LSB-first bit stream: index j occupies stream bits
// [j*b, (j+1)*b), and stream bit k is bit (k % 8) of byte k / 8. For b in {1, 2, 4, 8} every byte
// holds 8/b whole indices, which the byte-table kernels rely on.
#pragma once
#include <cstddef>
#include <cstdint>

// The library is built with hidden visibility: what this header declares is its exported API.
#pragma GCC visibility push(default)
namespace kvsketch {

constexpr size_t packed_bytes(size_t count, int bits) { return (count * static_cast<size_t>(bits) + 7) / 8; }

void pack_bits(const uint8_t* indices, size_t count, int bits, uint8_t* out);
void unpack_bits(const uint8_t* packed, size_t count, int bits, uint8_t* indices);

}  // namespace kvsketch
#pragma GCC visibility pop
