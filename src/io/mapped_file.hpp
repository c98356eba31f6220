// A file mapped read-only into memory (private: the file must not change while mapped), unmapped
// when it is destroyed. Errors name the path.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace kvsketch {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();
  const uint8_t* data() const { return data_; }  // null for an empty file
  size_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kvsketch
