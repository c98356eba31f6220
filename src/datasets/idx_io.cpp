// IDX files (MNIST, Fashion-MNIST), optionally gzip-compressed: magic 0x00 0x00 type ndims, then
// ndims big-endian uint32 sizes, then the data. Rows are the first axis; the rest is flattened.
#include <zlib.h>

#include <memory>
#include <vector>

#include "io/file_bytes.hpp"
#include "datasets/shape_product.hpp"
#include "core/require.hpp"
#include "kvsketch/eval/datasets.hpp"

namespace kvsketch {
namespace {

std::string read_gzip_or_plain(const std::string& path) {
  require_readable_file(path, "read");
  gzFile file = gzopen(path.c_str(), "rb");  // reads plain files unchanged
  require(file != nullptr, "cannot open '{}'", path);
  std::unique_ptr<gzFile_s, int (*)(gzFile)> closer(file, gzclose);
  std::string bytes;
  char buffer[1 << 16];
  while (true) {
    const int got = gzread(file, buffer, sizeof(buffer));
    int code = Z_OK;
    const char* message = gzerror(file, &code);
    require(got >= 0 && code == Z_OK, "'{}': cannot decompress: {}", path, message ? message : "gzip error");
    if (got == 0) break;
    bytes.append(buffer, static_cast<size_t>(got));
  }
  require(gzeof(file), "'{}': truncated gzip stream", path);
  return bytes;
}

uint32_t big_endian_u32(const std::string& bytes, size_t at) {
  uint32_t value = 0;
  for (size_t i = 0; i < 4; ++i) value = value << 8 | static_cast<unsigned char>(bytes[at + i]);
  return value;
}

}  // namespace

Matrix read_idx(const std::string& path) {
  const std::string bytes = read_gzip_or_plain(path);
  require(bytes.size() >= 4 && bytes[0] == 0 && bytes[1] == 0, "'{}': not an IDX file (bad magic)", path);
  const unsigned type = static_cast<unsigned char>(bytes[2]), ndims = static_cast<unsigned char>(bytes[3]);
  require(type == 0x08, "'{}': IDX element type 0x{:02x} is not supported (only unsigned bytes, 0x08)", path, type);
  require(ndims >= 1 && ndims <= 4, "'{}': IDX with {} dimensions", path, ndims);
  require(bytes.size() >= 4 + 4 * ndims, "'{}': truncated IDX header", path);
  std::vector<uint64_t> dims;
  for (unsigned i = 0; i < ndims; ++i) dims.push_back(big_endian_u32(bytes, 4 + 4 * i));
  Matrix m;
  m.rows = dims[0];
  m.cols = shape_product(path, std::vector<uint64_t>(dims.begin() + 1, dims.end()), 1);
  const size_t start = 4 + 4 * ndims, count = shape_product(path, dims, sizeof(float));
  require(count > 0, "'{}': empty IDX array", path);
  require(bytes.size() - start >= count, "'{}': truncated IDX data: {} bytes, expected {}", path, bytes.size() - start,
          count);
  m.values.resize(count);
  for (size_t i = 0; i < m.values.size(); ++i) m.values[i] = static_cast<unsigned char>(bytes[start + i]);
  return m;
}

}  // namespace kvsketch
