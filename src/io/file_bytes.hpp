// Reading a whole file into memory, with every failure (missing, a directory, unreadable, an I/O
// error midway) an Error naming the path and the reason.
#pragma once
#include <string>

namespace kvsketch {

// Throws Error unless `path` names a regular file that can be opened for reading; `what` starts
// the message ("load", "read").
void require_readable_file(const std::string& path, const char* what);

// The bytes of `path` appended to `out` (a std::string or std::vector<uint8_t>).
template <typename Bytes>
void read_whole_file(const std::string& path, const char* what, Bytes& out);

}  // namespace kvsketch
