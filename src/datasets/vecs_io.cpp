// .fvecs / .ivecs / .bvecs (the TEXMEX format of SIFT1M and friends): each row is an int32
// dimension followed by that many float32, int32 or uint8 values.
#include <cstring>

#include "core/require.hpp"
#include "kvsketch/eval/datasets.hpp"

namespace kvsketch {
namespace {

template <typename Element>
Matrix read_vecs(const std::string& path) {
  const std::string bytes = read_file_bytes(path);
  Matrix m;
  size_t offset = 0;
  while (offset < bytes.size()) {
    require(offset + 4 <= bytes.size(), "'{}': truncated at byte {} (row {} has no dimension)", path, offset, m.rows);
    int32_t dim;
    std::memcpy(&dim, bytes.data() + offset, 4);
    require(dim > 0 && dim <= 1 << 20, "'{}': row {} has invalid dimension {}", path, m.rows, dim);
    require(m.rows == 0 || static_cast<size_t>(dim) == m.cols, "'{}': row {} has dimension {}, expected {}", path,
            m.rows, dim, m.cols);
    const size_t row_bytes = sizeof(Element) * static_cast<size_t>(dim);
    require(offset + 4 + row_bytes <= bytes.size(), "'{}': truncated in row {}", path, m.rows);
    m.cols = static_cast<size_t>(dim);
    const size_t start = m.values.size();
    m.values.resize(start + m.cols);
    for (size_t c = 0; c < m.cols; ++c) {
      Element value;
      std::memcpy(&value, bytes.data() + offset + 4 + c * sizeof(Element), sizeof(Element));
      m.values[start + c] = static_cast<float>(value);
    }
    offset += 4 + row_bytes;
    ++m.rows;
  }
  require(m.rows > 0, "'{}': no vectors found", path);
  return m;
}

}  // namespace

Matrix read_fvecs(const std::string& path) { return read_vecs<float>(path); }
Matrix read_ivecs(const std::string& path) { return read_vecs<int32_t>(path); }
Matrix read_bvecs(const std::string& path) { return read_vecs<uint8_t>(path); }

}  // namespace kvsketch
