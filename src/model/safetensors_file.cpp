#include "model/safetensors_file.hpp"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <limits>

#include "io/json_sizes.hpp"
#include "core/require.hpp"
#include "io/mapped_file.hpp"
#include "kvsketch/half.hpp"

namespace kvsketch::model {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // safetensors' own limit

size_t element_bytes(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
  return 0;
}

float bf16_to_float(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;  // BF16 is the top half of a float32
  float v;
  std::memcpy(&v, &wide, 4);
  return v;
}

TensorInfo parse_entry(const std::string& path, const std::string& name, const nlohmann::json& entry,
                       size_t data_bytes) {
  require(entry.is_object(), "'{}': tensor '{}' has a malformed entry {}", path, name, entry.dump());
  TensorInfo t;
  try {
    t.dtype = entry.at("dtype").get<std::string>();
    const std::string field = fmt::format("'{}': tensor '{}': ", path, name);
    const auto shape = json_sizes(entry.at("shape"), field + "shape");
    t.shape.assign(shape.begin(), shape.end());
    const auto offsets = json_sizes(entry.at("data_offsets"), field + "data_offsets");
    require(offsets.size() == 2, "'{}': tensor '{}' has {} data_offsets; expected 2", path, name, offsets.size());
    t.begin = offsets[0];
    t.end = offsets[1];
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("'{}': tensor '{}' has a malformed entry: {}", path, name, e.what()));
  }
  const size_t size = element_bytes(t.dtype);
  require(size != 0, "'{}': tensor '{}' has unknown dtype '{}'", path, name, t.dtype);
  size_t count = 1;
  for (size_t extent : t.shape) {
    require(extent == 0 || count <= std::numeric_limits<size_t>::max() / size / extent,
            "'{}': tensor '{}' has shape [{}], too large", path, name, fmt::join(t.shape, ", "));
    count *= extent;
  }
  require(t.begin <= t.end && t.end <= data_bytes,
          "'{}': tensor '{}' spans bytes [{}, {}) of a data section of {} bytes (file truncated?)", path, name, t.begin,
          t.end, data_bytes);
  require(t.end - t.begin == count * size, "'{}': tensor '{}' has {} bytes of data; its shape [{}] of {} needs {}",
          path, name, t.end - t.begin, fmt::join(t.shape, ", "), t.dtype, count * size);
  return t;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path), file_(std::make_unique<MappedFile>(path)) {
  const size_t mapped_bytes = file_->size();
  require(mapped_bytes >= 8, "'{}' is not a .safetensors file ({} bytes, shorter than its header length)", path,
          mapped_bytes);
  const uint8_t* mapping = file_->data();
  uint64_t header_bytes;
  std::memcpy(&header_bytes, mapping, 8);
  require(header_bytes <= kMaxHeaderBytes && header_bytes <= mapped_bytes - 8,
          "'{}': header length {} runs past the end of the file ({} bytes)", path, header_bytes, mapped_bytes);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(mapping + 8, mapping + 8 + header_bytes);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("'{}': malformed header: {}", path, e.what()));
  }
  require(header.is_object(), "'{}': malformed header (not a JSON object)", path);
  data_ = mapping + 8 + header_bytes;
  const size_t data_bytes = mapped_bytes - 8 - header_bytes;
  for (const auto& [name, entry] : header.items())
    if (name != "__metadata__") tensors_.emplace(name, parse_entry(path, name, entry, data_bytes));
}

SafetensorsFile::~SafetensorsFile() = default;
SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept = default;

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  const auto it = tensors_.find(name);
  require(it != tensors_.end(), "'{}' has no tensor '{}'", path_, name);
  return it->second;
}

std::vector<float> SafetensorsFile::read_floats(const std::string& name) const {
  const TensorInfo& t = info(name);
  const uint8_t* p = data_ + t.begin;
  const size_t count = (t.end - t.begin) / element_bytes(t.dtype);
  std::vector<float> out(count);
  if (t.dtype == "F32") {
    std::memcpy(out.data(), p, count * 4);
  } else if (t.dtype == "F16" || t.dtype == "BF16") {
    const bool bf16 = t.dtype == "BF16";
    for (size_t i = 0; i < count; ++i) {
      uint16_t bits;
      std::memcpy(&bits, p + 2 * i, 2);
      out[i] = bf16 ? bf16_to_float(bits) : half_to_float(bits);
    }
  } else if (t.dtype == "F64") {
    for (size_t i = 0; i < count; ++i) {
      double v;
      std::memcpy(&v, p + 8 * i, 8);
      out[i] = static_cast<float>(v);
    }
  } else {
    throw Error(fmt::format("'{}': tensor '{}' has dtype {}; expected F32, F16, BF16 or F64", path_, name, t.dtype));
  }
  return out;
}

}  // namespace kvsketch::model
