// Helpers shared by the tests: seeded data, error messages, resealed files.
#pragma once
#include <gtest/gtest.h>
#include <hwy/targets.h>
#include <zlib.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/require.hpp"
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
// with `bytes` written over the payload at `at` and the trailer made to match: an edit the
// checksum does not catch, for the loaders' own checks.
inline std::string resealed_bytes(const std::string& file, size_t at, const std::string& bytes) {
  std::string payload = file.substr(0, file.size() - 16);
  payload.replace(at, bytes.size(), bytes);
  const uint32_t crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(payload.data()), static_cast<uInt>(payload.size())));
  const uint64_t length = payload.size();
  const uint32_t reserved = 0;
  payload.append(reinterpret_cast<const char*>(&length), 8);
  payload.append(reinterpret_cast<const char*>(&crc), 4);
  payload.append(reinterpret_cast<const char*>(&reserved), 4);
  return payload;
}

// The same with a u64 `value` over the 8 payload bytes at `at`.
inline std::string resealed(const std::string& file, size_t at, uint64_t value) {
  return resealed_bytes(file, at, std::string(reinterpret_cast<const char*>(&value), sizeof(value)));
}

// Runs the kvsketch tool with `arguments` (stderr joined to stdout): its exit status and output.
inline std::pair<int, std::string> run_tool(const std::string& arguments) {
  const std::string command = std::string(KVSKETCH_TOOL_PATH) + " " + arguments + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  std::string output;
  std::array<char, 4096> buffer;
  size_t got;
  while ((got = fread(buffer.data(), 1, buffer.size(), pipe.get())) > 0) output.append(buffer.data(), got);
  const int status = pclose(pipe.release());
  return {WEXITSTATUS(status), output};
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
