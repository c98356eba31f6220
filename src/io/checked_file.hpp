// Binary files with a 16-byte magic, a payload and a trailer (u64 payload bytes, u32 CRC-32 of
// the payload, u32 reserved), written beside the target and renamed over it, so that a failed
// save leaves any old file intact. Used by the cache and index files.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/require.hpp"

namespace kvsketch {

class BinaryWriter {
 public:
  void raw(const void* data, size_t n) {
    if (n == 0) return;
    const size_t at = bytes_.size();
    bytes_.resize(at + n);
    std::memcpy(bytes_.data() + at, data, n);
  }
  void u64(uint64_t v) { raw(&v, 8); }
  void u32(uint32_t v) { raw(&v, 4); }
  void f32(float v) { raw(&v, 4); }
  // Zero bytes up to the next multiple of alignment from the start, so that an array written next
  // lies aligned in a mapped file.
  void align(size_t alignment) {
    const size_t pad = (alignment - bytes_.size() % alignment) % alignment;
    bytes_.resize(bytes_.size() + pad, 0);
  }
  void text(const std::string& s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Reads the payload of a loaded file; every read names what it wanted when the file is short.
class BinaryReader {
 public:
  BinaryReader(const std::vector<uint8_t>& bytes, size_t end, const std::string& path)
      : BinaryReader(bytes.data(), end, path) {}
  BinaryReader(const uint8_t* bytes, size_t end, const std::string& path) : bytes_(bytes), end_(end), path_(path) {}
  const uint8_t* take(size_t n, const char* what) {
    require(n <= end_ - position_, "load: {} is truncated or corrupted: {} needs {} bytes at offset {}, {} remain",
            path_, what, n, position_, end_ - position_);
    const uint8_t* p = bytes_ + position_;
    position_ += n;
    return p;
  }
  uint64_t u64(const char* what) {
    uint64_t v;
    std::memcpy(&v, take(8, what), 8);
    return v;
  }
  uint32_t u32(const char* what) {
    uint32_t v;
    std::memcpy(&v, take(4, what), 4);
    return v;
  }
  float f32(const char* what) {
    float v;
    std::memcpy(&v, take(4, what), 4);
    return v;
  }
  std::string text(const char* what) {
    const uint64_t n = u64(what);
    const uint8_t* p = take(n, what);
    return std::string(reinterpret_cast<const char*>(p), n);
  }
  template <typename T, typename Allocator>
  void into(std::vector<T, Allocator>& out, size_t count, const char* what) {
    require(count <= (end_ - position_) / sizeof(T), "load: {} is truncated or corrupted: {} claims {} items", path_,
            what, count);
    out.resize(count);
    if (count) std::memcpy(out.data(), take(count * sizeof(T), what), count * sizeof(T));
  }
  // Skips what BinaryWriter::align wrote.
  void align(size_t alignment, const char* what) { take((alignment - position_ % alignment) % alignment, what); }
  size_t position() const { return position_; }
  size_t remaining() const { return end_ - position_; }
  const std::string& path() const { return path_; }

 private:
  const uint8_t* bytes_;
  size_t end_, position_ = 0;
  const std::string& path_;
};

uint32_t crc32_of(const uint8_t* data, size_t n);

// Appends the trailer (length, CRC-32) to payload, which starts with the magic.
void append_checked_trailer(BinaryWriter& payload);
// Appends the trailer and writes the whole to path atomically.
void save_checked_file(const std::string& path, BinaryWriter& payload);

// Reads path, checks magic (16 bytes), length and CRC; returns the bytes and sets payload_end.
// what_kind names the file type in errors ("kvsketch cache").
std::vector<uint8_t> load_checked_file(const std::string& path, const char (&magic)[16], const char* what_kind,
                                       size_t& payload_end);
// The same checks on bytes in memory (a file image from append_checked_trailer); path names them.
size_t checked_payload_end(const std::vector<uint8_t>& bytes, const char (&magic)[16], const char* what_kind,
                           const std::string& path);
size_t checked_payload_end(const uint8_t* bytes, size_t size, const char (&magic)[16], const char* what_kind,
                           const std::string& path);

}  // namespace kvsketch
