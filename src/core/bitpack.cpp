#include "kvsketch/bitpack.hpp"

#include <bit>
#include <cstring>

namespace kvsketch {

static_assert(std::endian::native == std::endian::little, "the packing below reads indices as little-endian words");

namespace {

// Whole groups of eight b-bit indices packed LSB first, each group's word stored as its b low
// bytes (little-endian); returns the indices packed.
template <int kBits>
size_t pack_words(const uint8_t* indices, size_t count, uint8_t* out) {
  size_t j = 0;
  for (; j + 8 <= count; j += 8, out += kBits) {
    uint64_t word = 0;
    for (int k = 0; k < 8; ++k) word |= uint64_t{indices[j + k]} << (kBits * k);
    std::memcpy(out, &word, kBits);
  }
  return j;
}

}  // namespace

void pack_bits(const uint8_t* indices, size_t count, int bits, uint8_t* out) {
  const size_t bytes = packed_bytes(count, bits);
  if (bits == 8) {
    std::memcpy(out, indices, count);
    return;
  }
  if (bits == 4) {
    // Two indices read as one little-endian u16 w = lo | hi << 8; the low byte of w | w >> 4 is
    // lo | hi << 4. Written this way the loop vectorizes.
    for (size_t p = 0; p < count / 2; ++p) {
      uint16_t w;
      std::memcpy(&w, indices + 2 * p, 2);
      out[p] = static_cast<uint8_t>(w | (w >> 4));
    }
    if (count % 2) out[count / 2] = indices[count - 1];
    return;
  }
  if (bits == 2) {
    // Four indices as one little-endian u32, folded the same way: low byte = v0 | v1<<2 | v2<<4 | v3<<6.
    const size_t full = count / 4;
    for (size_t p = 0; p < full; ++p) {
      uint32_t w;
      std::memcpy(&w, indices + 4 * p, 4);
      w |= w >> 6;
      out[p] = static_cast<uint8_t>(w | (w >> 12));
    }
    if (count % 4) {
      out[full] = 0;
      for (size_t j = 4 * full; j < count; ++j) out[full] |= static_cast<uint8_t>(indices[j] << (2 * (j % 4)));
    }
    return;
  }
  if (bits == 1) {
    std::memset(out, 0, bytes);  // the bits are or-ed in; every other width below writes each byte
    for (size_t j = 0; j < count; ++j) out[j >> 3] |= static_cast<uint8_t>(indices[j] << (j & 7));
    return;
  }
  // 3, 5, 6 and 7 bits: eight indices make exactly `bits` bytes, built in one word (the bit at a
  // time loop below took 6% of a tq_prod:b=3|tq_mse:b=3 append, the values' 3-bit codes).
  size_t j = 0;
  switch (bits) {
    case 3: j = pack_words<3>(indices, count, out); break;
    case 5: j = pack_words<5>(indices, count, out); break;
    case 6: j = pack_words<6>(indices, count, out); break;
    case 7: j = pack_words<7>(indices, count, out); break;
    default: break;
  }
  size_t position = j / 8 * static_cast<size_t>(bits);
  uint64_t buffer = 0;
  int filled = 0;
  for (; j < count; ++j) {
    buffer |= static_cast<uint64_t>(indices[j]) << filled;
    filled += bits;
    while (filled >= 8) {
      out[position++] = static_cast<uint8_t>(buffer);
      buffer >>= 8;
      filled -= 8;
    }
  }
  if (filled > 0) out[position] = static_cast<uint8_t>(buffer);
}

void unpack_bits(const uint8_t* packed, size_t count, int bits, uint8_t* indices) {
  if (bits == 8) {
    std::memcpy(indices, packed, count);
    return;
  }
  const uint32_t mask = (1u << bits) - 1u;
  const size_t bytes = packed_bytes(count, bits);
  size_t j = 0, position = 0;
  // Widths that divide a byte: every output a shift and a mask of one input byte, loops the
  // compiler vectorizes (the KIVI and q4_0 baselines unpack every row they read).
  if (bits == 4) {
    for (; j + 2 <= count; j += 2, ++position) {
      indices[j] = packed[position] & 15u;
      indices[j + 1] = static_cast<uint8_t>(packed[position] >> 4);
    }
  } else if (bits == 2) {
    // Eight indices from two bytes, spread apart in a word in three steps: bytes to 32-bit
    // halves, nibbles to 16-bit quarters, pairs of bits to bytes.
    for (; j + 8 <= count; j += 8, position += 2) {
      uint16_t pair;
      std::memcpy(&pair, packed + position, 2);
      uint64_t x = pair;
      x = (x | (x << 24)) & 0x000000FF000000FFull;
      x = (x | (x << 12)) & 0x000F000F000F000Full;
      x = (x | (x << 6)) & 0x0303030303030303ull;
      std::memcpy(indices + j, &x, 8);
    }
  }
  // Eight indices at a time are exactly `bits` bytes: one little-endian word each, while a whole
  // 8-byte load stays within the packed bytes (a bit at a time took most of a KIVI decode step).
  for (; j + 8 <= count && position + 8 <= bytes; j += 8, position += static_cast<size_t>(bits)) {
    uint64_t word;
    std::memcpy(&word, packed + position, 8);
    for (int k = 0; k < 8; ++k) indices[j + k] = static_cast<uint8_t>((word >> (bits * k)) & mask);
  }
  uint64_t buffer = 0;
  int filled = 0;
  for (; j < count; ++j) {
    while (filled < bits) {
      buffer |= static_cast<uint64_t>(position < bytes ? packed[position] : 0) << filled;
      ++position;
      filled += 8;
    }
    indices[j] = static_cast<uint8_t>(buffer & mask);
    buffer >>= bits;
    filled -= bits;
  }
}

}  // namespace kvsketch
