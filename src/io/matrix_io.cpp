#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "io/shape_product.hpp"
#include "kvsketch/error.hpp"
#include "kvsketch/io.hpp"

namespace kvsketch {
namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string read_file_bytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  require(file.good(), "cannot open '{}'", path);
  std::ostringstream content;
  content << file.rdbuf();
  return content.str();
}

Matrix read_matrix(const std::string& path) {
  if (ends_with(path, ".tsv") || ends_with(path, ".csv") || ends_with(path, ".txt")) return read_tsv(path);
  if (ends_with(path, ".fvecs")) return read_fvecs(path);
  if (ends_with(path, ".ivecs")) return read_ivecs(path);
  if (ends_with(path, ".bvecs")) return read_bvecs(path);
  if (ends_with(path, ".npy")) return read_npy(path);
  if (ends_with(path, "-ubyte") || ends_with(path, "-ubyte.gz")) return read_idx(path);
  const size_t colon = path.rfind(':');
  const std::string file = path.substr(0, colon);
  const std::string name = colon == std::string::npos ? "" : path.substr(colon + 1);
  if (ends_with(file, ".safetensors")) return read_safetensors(file, name);
  if (ends_with(file, ".hdf5") || ends_with(file, ".h5")) {
    require(!name.empty(), "'{}': name the dataset, as FILE.hdf5:NAME (e.g. :train)", path);
    return read_hdf5(file, name);
  }
  throw Error("'" + path +
              "': unknown file type; expected .tsv, .csv, .txt, .fvecs, .ivecs, .bvecs, .npy, "
              "IDX (-ubyte[.gz]), .safetensors[:NAME] or .hdf5:NAME");
}

Matrix read_tsv(const std::string& path) {
  std::ifstream file(path);
  require(file.good(), "cannot open '{}'", path);
  Matrix m;
  std::vector<std::vector<double>> rows;
  std::string line;
  size_t line_number = 0;
  while (std::getline(file, line)) {
    ++line_number;
    if (line.empty() || line[0] == '#') continue;
    for (char& c : line)
      if (c == ',' || c == '\t' || c == '\r') c = ' ';
    std::istringstream fields(line);
    std::vector<double> row;
    std::string token;
    while (fields >> token) {
      char* end = nullptr;
      const double value = std::strtod(token.c_str(), &end);
      require(end && *end == '\0', "'{}' line {}: '{}' is not a number", path, line_number, token);
      row.push_back(value);
    }
    require(rows.empty() || row.size() == rows.front().size(), "'{}' line {}: {} columns, expected {}", path,
            line_number, row.size(), rows.empty() ? 0 : rows.front().size());
    rows.push_back(std::move(row));
  }
  require(!rows.empty() && !rows.front().empty(), "'{}': no vectors found", path);
  m.rows = rows.size();
  m.cols = rows.front().size();
  // A last column of consecutive integers (an id column) is not part of the vectors.
  bool id_column = m.cols > 1 && m.rows > 1;
  for (size_t r = 0; r < m.rows && id_column; ++r)
    id_column = rows[r].back() == rows.front().back() + static_cast<double>(r);
  if (id_column) --m.cols;
  m.values.reserve(m.rows * m.cols);
  for (const auto& row : rows)
    for (size_t c = 0; c < m.cols; ++c) m.values.push_back(static_cast<float>(row[c]));
  return m;
}

Matrix read_npy(const std::string& path) {
  const std::string bytes = read_file_bytes(path);
  require(bytes.size() >= 10 && bytes.compare(0, 6, "\x93NUMPY") == 0, "'{}': not a .npy file (bad magic)", path);
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_length, header_start;
  if (major == 1) {
    header_length = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    header_start = 10;
  } else {
    require(bytes.size() >= 12, "'{}': truncated header", path);
    uint32_t length;
    std::memcpy(&length, bytes.data() + 8, 4);
    header_length = length;
    header_start = 12;
  }
  require(header_start + header_length <= bytes.size(), "'{}': truncated header", path);
  const std::string header = bytes.substr(header_start, header_length);
  auto field = [&](const std::string& key) {
    const size_t at = header.find("'" + key + "'");
    require(at != std::string::npos, "'{}': header lacks '{}'", path, key);
    return header.substr(header.find(':', at) + 1);
  };
  const std::string descr = field("descr");
  const bool is_f4 = descr.find("<f4") != std::string::npos, is_f8 = descr.find("<f8") != std::string::npos;
  require(is_f4 || is_f8, "'{}': dtype must be little-endian float32 or float64 ('<f4'/'<f8')", path);
  require(field("fortran_order").find("False") < field("fortran_order").find("True"),
          "'{}': Fortran-ordered arrays are not supported", path);
  const std::string shape_text = field("shape");
  const std::string inside = shape_text.substr(shape_text.find('(') + 1, shape_text.find(')') - shape_text.find('(') - 1);
  std::vector<uint64_t> shape;
  std::istringstream dims(inside);
  std::string item;
  while (std::getline(dims, item, ',')) {
    const size_t first = item.find_first_not_of(' '), last = item.find_last_not_of(' ');
    if (first == std::string::npos) continue;
    uint64_t dim = 0;
    const char* end = item.data() + last + 1;
    const auto [stop, error] = std::from_chars(item.data() + first, end, dim);
    require(error == std::errc() && stop == end, "'{}': shape entry '{}' is not a non-negative integer", path,
            item.substr(first, last + 1 - first));
    shape.push_back(dim);
  }
  require(shape.size() == 1 || shape.size() == 2, "'{}': expected a 1-D or 2-D array, got {} dimensions", path,
          shape.size());
  const size_t element = is_f4 ? 4 : 8, count = shape_product(path, shape, element);
  Matrix m;
  m.rows = shape.size() == 2 ? shape[0] : 1;
  m.cols = shape.back();
  const size_t data_start = header_start + header_length;
  require(bytes.size() - data_start >= count * element, "'{}': truncated data: {} bytes, expected {}", path,
          bytes.size() - data_start, count * element);
  m.values.resize(count);
  for (size_t i = 0; i < m.values.size(); ++i) {
    if (is_f4) {
      std::memcpy(&m.values[i], bytes.data() + data_start + 4 * i, 4);
    } else {
      double value;
      std::memcpy(&value, bytes.data() + data_start + 8 * i, 8);
      m.values[i] = static_cast<float>(value);
    }
  }
  return m;
}

}  // namespace kvsketch
