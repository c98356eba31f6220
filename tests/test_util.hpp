// Helpers shared by the tests: seeded data, error messages, resealed files.
#pragma once
#include <gtest/gtest.h>
#include <hwy/targets.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kvsketch/error.hpp"
#include "kvsketch/random.hpp"

namespace kvsketch::testutil {

inline std::vector<float> gaussian_matrix(size_t rows, size_t cols, uint64_t seed, double scale = 1.0) {
  RandomStream stream(seed, StreamPurpose::kTest, {rows, cols});
  std::vector<float> values(rows * cols);
  for (auto& v : values) v = static_cast<float>(scale * stream.gaussian());
  return values;
}

// The message of the kvsketch::Error that `call` throws, or "accepted" when it throws none.
inline std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

// A cache or index file (checked_file.hpp: payload, then u64 payload bytes, u32 CRC-32, u32 0)
// with `value` written over the 8 payload bytes at `at` and the trailer made to match: an edit
// the checksum does not catch, for the loaders' own checks.
inline std::string resealed(const std::string& file, size_t at, uint64_t value) {
  std::string payload = file.substr(0, file.size() - 16);
  std::memcpy(payload.data() + at, &value, sizeof(value));
  const uint32_t crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(payload.data()), static_cast<uInt>(payload.size())));
  const uint64_t length = payload.size();
  const uint32_t reserved = 0;
  payload.append(reinterpret_cast<const char*>(&length), 8);
  payload.append(reinterpret_cast<const char*>(&crc), 4);
  payload.append(reinterpret_cast<const char*>(&reserved), 4);
  return payload;
}

// Runs `check` once per SIMD target compiled in and supported by this CPU.
template <typename Check>
void for_each_target(Check check) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    check();
  }
  hwy::SetSupportedTargetsForTest(0);
}

inline double norm(const float* x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return std::sqrt(s);
}

inline double dot(const float* a, const float* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

}  // namespace kvsketch::testutil
