#include <cmath>
#include <fstream>
#include <sstream>

#include "io/file_bytes.hpp"
#include "core/require.hpp"
#include "kvsketch/eval/datasets.hpp"

namespace kvsketch {
namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

bool is_text_table(const std::string& path) {
  return ends_with(path, ".tsv") || ends_with(path, ".csv") || ends_with(path, ".txt");
}

Matrix read_matrix(const std::string& path) {
  if (is_text_table(path)) return read_tsv(path, TsvIds::kNone);
  if (ends_with(path, ":ids") && is_text_table(path.substr(0, path.size() - 4)))
    return read_tsv(path.substr(0, path.size() - 4), TsvIds::kLastColumn);
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
              "': unknown file type; expected .tsv, .csv, .txt (with :ids when the last column holds ids), "
              ".fvecs, .ivecs, .bvecs, .npy, "
              "IDX (-ubyte[.gz]), .safetensors[:NAME] or .hdf5:NAME");
}

Matrix read_tsv(const std::string& path, TsvIds ids) {
  require_readable_file(path, "read");
  std::ifstream file(path);
  require(file.good(), "read: cannot open '{}'", path);
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
  if (ids == TsvIds::kLastColumn) {
    require(m.cols >= 2, "'{}:ids': an id column needs at least one value column beside it", path);
    for (size_t r = 0; r < m.rows; ++r) {
      const double id = rows[r].back();
      require(id == std::floor(id) && std::abs(id) < 9.0e15, "'{}:ids': row {} has id {}, not an integer", path, r,
              id);
    }
    --m.cols;
  }
  m.values.reserve(m.rows * m.cols);
  for (const auto& row : rows)
    for (size_t c = 0; c < m.cols; ++c) m.values.push_back(static_cast<float>(row[c]));
  return m;
}

std::string read_file_bytes(const std::string& path) {
  std::string bytes;
  read_whole_file(path, "read", bytes);
  return bytes;
}

}  // namespace kvsketch
