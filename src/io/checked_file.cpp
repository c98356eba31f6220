#include "io/checked_file.hpp"

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "io/file_bytes.hpp"

namespace kvsketch {
namespace {
constexpr size_t kTrailerBytes = 16;
}  // namespace

uint32_t crc32_of(const uint8_t* data, size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {  // zlib takes uInt lengths
    const uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = crc32(crc, data, chunk);
    data += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

void append_checked_trailer(BinaryWriter& out) {
  const uint64_t payload = out.bytes().size();
  const uint32_t crc = crc32_of(out.bytes().data(), payload);
  out.u64(payload);
  out.u32(crc);
  out.u32(0);
}

void save_checked_file(const std::string& path, BinaryWriter& out) {
  append_checked_trailer(out);
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    require(file.good(), "save: cannot open {} for writing", temporary);
    file.write(reinterpret_cast<const char*>(out.bytes().data()), static_cast<std::streamsize>(out.bytes().size()));
    file.flush();
    require(file.good(), "save: writing {} failed (disk full?)", temporary);
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  require(!error, "save: cannot move {} to {}: {}", temporary, path, error.message());
}

std::vector<uint8_t> load_checked_file(const std::string& path, const char (&magic)[16], const char* what_kind,
                                       size_t& payload_end) {
  std::vector<uint8_t> bytes;
  read_whole_file(path, "load", bytes);
  payload_end = checked_payload_end(bytes, magic, what_kind, path);
  return bytes;
}

size_t checked_payload_end(const std::vector<uint8_t>& bytes, const char (&magic)[16], const char* what_kind,
                           const std::string& path) {
  return checked_payload_end(bytes.data(), bytes.size(), magic, what_kind, path);
}

size_t checked_payload_end(const uint8_t* bytes, size_t size, const char (&magic)[16], const char* what_kind,
                           const std::string& path) {
  require(size >= sizeof(magic) + kTrailerBytes, "load: {} is too short ({} bytes) to be a {} file", path, size,
          what_kind);
  require(std::memcmp(bytes, magic, sizeof(magic)) == 0, "load: {} is not a {} file (bad magic)", path, what_kind);
  const size_t end = size - kTrailerBytes;
  uint64_t payload;
  uint32_t crc;
  std::memcpy(&payload, bytes + end, 8);
  std::memcpy(&crc, bytes + end + 8, 4);
  // A file cut short ends inside its payload, so the "length" read there is noise: named only when
  // it is shorter than the file (bytes appended after a whole file).
  require(payload <= end,
          "load: {} is truncated or damaged: its last {} bytes should record the {} bytes before them (a {} file "
          "ends with that length and a CRC-32)",
          path, kTrailerBytes, end, what_kind);
  require(payload == end, "load: {} has {} trailing bytes after a {}-byte payload (or is damaged)", path,
          end - payload, payload);
  require(crc32_of(bytes, end) == crc, "load: {} is corrupted (CRC-32 mismatch)", path);
  return end;
}

}  // namespace kvsketch
