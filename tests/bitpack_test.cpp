#include <gtest/gtest.h>

#include "kvsketch/bitpack.hpp"
#include "kvsketch/random.hpp"

using namespace kvsketch;

TEST(BitPack, RoundTripsEveryWidthAndLength) {
  RandomStream stream(3);
  for (int bits = 1; bits <= 8; ++bits) {
    for (size_t count : {1, 7, 8, 9, 80, 127, 128, 1536}) {
      std::vector<uint8_t> indices(count), unpacked(count);
      for (auto& i : indices) i = static_cast<uint8_t>(stream.below(size_t{1} << bits));
      std::vector<uint8_t> packed(packed_bytes(count, bits) + 1, 0xAB);
      pack_bits(indices.data(), count, bits, packed.data());
      EXPECT_EQ(packed.back(), 0xAB) << "wrote past packed_bytes";
      unpack_bits(packed.data(), count, bits, unpacked.data());
      EXPECT_EQ(indices, unpacked) << "bits=" << bits << " count=" << count;
    }
  }
}

// Every width's bytes are those of the definition, index j's bit k at stream bit bits * j + k
// (LSB first), with the unused bits of the last byte zero.
TEST(BitPack, BytesAreTheBitStreamOfTheDefinition) {
  RandomStream stream(5);
  for (int bits = 1; bits <= 8; ++bits) {
    for (size_t count : {1, 5, 8, 15, 16, 17, 100, 128, 783}) {
      std::vector<uint8_t> indices(count);
      for (auto& i : indices) i = static_cast<uint8_t>(stream.below(size_t{1} << bits));
      std::vector<uint8_t> expected(packed_bytes(count, bits), 0);
      for (size_t j = 0; j < count; ++j)
        for (int k = 0; k < bits; ++k) {
          const size_t bit = static_cast<size_t>(bits) * j + static_cast<size_t>(k);
          expected[bit / 8] |= static_cast<uint8_t>(((indices[j] >> k) & 1) << (bit % 8));
        }
      std::vector<uint8_t> packed(expected.size(), 0xCD);  // garbage: every byte must be written
      pack_bits(indices.data(), count, bits, packed.data());
      EXPECT_EQ(packed, expected) << "bits=" << bits << " count=" << count;
    }
  }
}

TEST(BitPack, LayoutIsLsbFirst) {
  const uint8_t indices[] = {1, 2, 3, 4, 5, 6, 7, 0};
  uint8_t packed[3];
  pack_bits(indices, 8, 3, packed);
  // stream bits: 1=001 2=010 3=011 ... read LSB first
  EXPECT_EQ(packed[0], 0b11010001);
  EXPECT_EQ(packed_bytes(128, 3), 48u);
  EXPECT_EQ(packed_bytes(100, 5), 63u);
  const uint8_t nibbles[] = {0xA, 0x3};
  pack_bits(nibbles, 2, 4, packed);
  EXPECT_EQ(packed[0], 0x3A);
}
