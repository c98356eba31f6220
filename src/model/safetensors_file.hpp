// A .safetensors file (Hugging Face), mapped read-only: a little-endian u64 header length, a JSON
// header mapping tensor names to {dtype, shape, data_offsets}, then the raw data. Every entry is
// checked when the file opens (dtype, shape, offsets within the file, size agreeing with the
// shape), so that reading a tensor later cannot run outside the mapping.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kvsketch {
class MappedFile;
}

namespace kvsketch::model {

struct TensorInfo {
  std::string dtype;            // F32, F16, BF16, F64, or an integer type (not readable as floats)
  std::vector<size_t> shape;
  size_t begin = 0, end = 0;    // byte offsets into the data section
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  SafetensorsFile(SafetensorsFile&& other) noexcept;

  const std::string& path() const { return path_; }
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const;
  // The tensor's elements as floats, in row-major order; F64 is rounded, integer dtypes refused.
  std::vector<float> read_floats(const std::string& name) const;

 private:
  std::string path_;
  std::unique_ptr<MappedFile> file_;
  const uint8_t* data_ = nullptr;  // the data section
  std::map<std::string, TensorInfo> tensors_;
};

}  // namespace kvsketch::model
