// Reading vectors: .tsv/.csv/.txt (one vector per line, every column a value; "FILE.tsv:ids" when
// the last column holds integer ids, as in the bundled SIFT sample, which are then dropped),
// .fvecs/.ivecs/.bvecs, .npy (little-endian float16/32/64, C order, 1-D or 2-D), IDX (MNIST-style,
// optionally gzipped), .safetensors (F32/F64/F16/BF16; [..., cols] is read as rows x cols) and
// HDF5 datasets (ann-benchmarks files). read_matrix picks the reader by file name; a tensor or
// dataset inside a file is named after a colon: "x.safetensors:keys", "glove.hdf5:train".
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

// Whether a text table's last column holds ids (not part of the vectors).
enum class TsvIds { kNone, kLastColumn };

Matrix read_matrix(const std::string& path);
Matrix read_tsv(const std::string& path, TsvIds ids = TsvIds::kNone);
Matrix read_fvecs(const std::string& path);
Matrix read_ivecs(const std::string& path);
Matrix read_bvecs(const std::string& path);
Matrix read_npy(const std::string& path);
Matrix read_idx(const std::string& path);
// name may be empty when the file holds a single tensor.
Matrix read_safetensors(const std::string& path, const std::string& name);
Matrix read_hdf5(const std::string& path, const std::string& name);
// The whole file; throws Error naming it when it cannot be opened.
std::string read_file_bytes(const std::string& path);

}  // namespace kvsketch
