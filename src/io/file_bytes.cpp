#include "io/file_bytes.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "core/require.hpp"

namespace kvsketch {

void require_readable_file(const std::string& path, const char* what) {
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  require(!error && std::filesystem::exists(status), "{}: cannot open '{}': {}", what, path,
          error ? error.message() : "no such file");
  require(!std::filesystem::is_directory(status), "{}: '{}' is a directory, not a file", what, path);
}

template <typename Bytes>
void read_whole_file(const std::string& path, const char* what, Bytes& out) {
  require_readable_file(path, what);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), std::fclose);
  require(file != nullptr, "{}: cannot open '{}': {}", what, path, std::strerror(errno));
  char buffer[1 << 16];
  while (true) {
    const size_t got = std::fread(buffer, 1, sizeof(buffer), file.get());
    out.insert(out.end(), buffer, buffer + got);
    if (got < sizeof(buffer)) break;
  }
  require(!std::ferror(file.get()), "{}: reading '{}' failed: {}", what, path, std::strerror(errno));
}

template void read_whole_file(const std::string&, const char*, std::string&);
template void read_whole_file(const std::string&, const char*, std::vector<uint8_t>&);

}  // namespace kvsketch
