// Shared by the libFuzzer targets: the input as a file (the readers take paths), and the rule
// that a reader either returns or throws kvsketch::Error; anything else (another exception, a
// crash, a hang, an allocation beyond the fuzzer's limit) is a finding.
#pragma once
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kvsketch/error.hpp"

namespace kvsketch::fuzz {

// Writes bytes to a per-process file whose name ends with `suffix` (readers choose by name).
inline std::string write_input(const uint8_t* data, size_t size, const std::string& suffix) {
  const std::string path = "/tmp/kvsketch_fuzz_" + std::to_string(getpid()) + suffix;
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) std::abort();
  if (size && std::fwrite(data, 1, size, file) != size) std::abort();
  std::fclose(file);
  return path;
}

// A cache or index file around `payload`: the trailer (u64 payload bytes, u32 CRC-32, u32 0) made
// to match, so that the fuzzer reaches the loader's own checks rather than the checksum's.
inline std::vector<uint8_t> sealed(const uint8_t* payload, size_t size) {
  std::vector<uint8_t> file(payload, payload + size);
  const uint64_t length = size;
  const uint32_t crc = static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0), payload, static_cast<uInt>(size)));
  const uint32_t reserved = 0;
  for (const auto& [field, bytes] : {std::pair<const void*, size_t>{&length, 8}, {&crc, 4}, {&reserved, 4}}) {
    const auto* p = static_cast<const uint8_t*>(field);
    file.insert(file.end(), p, p + bytes);
  }
  return file;
}

// Stops the run where a loaded object gives a non-finite result: silent garbage is a finding too.
inline void require_finite(float value, const char* what) {
  if (!(value == value) || value - value != 0.0f) {
    std::fprintf(stderr, "kvsketch fuzz: %s is %f\n", what, static_cast<double>(value));
    std::abort();
  }
}

}  // namespace kvsketch::fuzz
