// Reading vectors: .tsv/.csv (one vector per line; a last column of consecutive integer ids, as in
// the bundled SIFT sample, is dropped), .fvecs, and .npy (float32/float64, C order, 1-D or 2-D).
// Truncated or malformed files throw Error naming the file and the problem.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace kvsketch {

struct Matrix {
  size_t rows = 0;
  size_t cols = 0;
  std::vector<float> values;  // row-major
  const float* row(size_t i) const { return values.data() + i * cols; }
};

Matrix read_matrix(const std::string& path);
Matrix read_tsv(const std::string& path);
Matrix read_fvecs(const std::string& path);
Matrix read_npy(const std::string& path);

}  // namespace kvsketch
