// .safetensors (Hugging Face): a little-endian u64 header length, a JSON header mapping tensor
// names to {dtype, shape, data_offsets}, then the raw data. A tensor of shape [..., cols] is read
// as rows = the product of the leading axes.
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cstring>

#include "io/json_sizes.hpp"
#include "datasets/shape_product.hpp"
#include "core/require.hpp"
#include "kvsketch/half.hpp"
#include "kvsketch/eval/datasets.hpp"

namespace kvsketch {
namespace {

float element(const std::string& dtype, const char* data) {
  if (dtype == "F32") {
    float v;
    std::memcpy(&v, data, 4);
    return v;
  }
  if (dtype == "F64") {
    double v;
    std::memcpy(&v, data, 8);
    return static_cast<float>(v);
  }
  uint16_t bits;
  std::memcpy(&bits, data, 2);
  if (dtype == "F16") return half_to_float(bits);
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;  // BF16: the top half of a float32
  float v;
  std::memcpy(&v, &wide, 4);
  return v;
}

size_t element_bytes(const std::string& path, const std::string& name, const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F64") return 8;
  if (dtype == "F16" || dtype == "BF16") return 2;
  throw Error(fmt::format("'{}': tensor '{}' has dtype {}; expected F32, F64, F16 or BF16", path, name, dtype));
}

}  // namespace

Matrix read_safetensors(const std::string& path, const std::string& name) {
  const std::string bytes = read_file_bytes(path);
  require(bytes.size() >= 8, "'{}': not a .safetensors file (shorter than its header length)", path);
  uint64_t header_length;
  std::memcpy(&header_length, bytes.data(), 8);
  require(header_length <= bytes.size() - 8, "'{}': header length {} runs past the end of the file", path,
          header_length);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.substr(8, header_length));
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("'{}': malformed header: {}", path, e.what()));
  }
  require(header.is_object(), "'{}': malformed header (not a JSON object)", path);
  std::vector<std::string> names;
  for (const auto& [key, value] : header.items())
    if (key != "__metadata__") names.push_back(key);
  std::string chosen = name;
  if (chosen.empty()) {
    require(names.size() == 1, "'{}' holds {} tensors; name one as FILE.safetensors:NAME ({})", path, names.size(),
            fmt::join(names, ", "));
    chosen = names.front();
  }
  require(header.contains(chosen) && chosen != "__metadata__", "'{}' has no tensor '{}' (it has: {})", path, chosen,
          fmt::join(names, ", "));
  const nlohmann::json& tensor = header[chosen];
  try {
    const std::string dtype = tensor.at("dtype").get<std::string>();
    const std::string field = fmt::format("'{}': tensor '{}': ", path, chosen);
    const auto shape = json_sizes(tensor.at("shape"), field + "shape");
    const auto offsets = json_sizes(tensor.at("data_offsets"), field + "data_offsets");
    require(!shape.empty(), "'{}': tensor '{}' is a scalar; expected [rows, cols]", path, chosen);
    require(offsets.size() == 2 && offsets[0] <= offsets[1], "'{}': tensor '{}' has invalid data_offsets", path,
            chosen);
    const size_t size = element_bytes(path, chosen, dtype), count = shape_product(path, shape, size);
    Matrix m;
    m.cols = shape.back();
    m.rows = shape_product(path, std::vector<uint64_t>(shape.begin(), shape.end() - 1), 1);
    require(count > 0, "'{}': tensor '{}' is empty", path, chosen);
    require(offsets[1] - offsets[0] == count * size, "'{}': tensor '{}' has {} bytes of data, its shape needs {}", path,
            chosen, offsets[1] - offsets[0], count * size);
    const size_t start = 8 + header_length + offsets[0];
    require(offsets[1] <= bytes.size() - 8 - header_length, "'{}': truncated data of tensor '{}'", path, chosen);
    m.values.resize(count);
    for (size_t i = 0; i < m.values.size(); ++i) m.values[i] = element(dtype, bytes.data() + start + i * size);
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("'{}': tensor '{}' has a malformed entry: {}", path, chosen, e.what()));
  }
}

}  // namespace kvsketch
