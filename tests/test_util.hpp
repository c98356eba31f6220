// Helpers shared by the tests: seeded data, error messages.
#pragma once
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
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
