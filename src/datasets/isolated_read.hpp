// Runs a reader that calls a third-party parser in a child process, so that a crash of that parser
// on a corrupt or crafted file (libhdf5 dereferences a failed allocation on some) becomes an Error
// naming the file instead of taking the caller down. The child sends the matrix, or its Error's
// message, back through a pipe.
#pragma once
#include <functional>
#include <string>

#include "kvsketch/eval/datasets.hpp"

namespace kvsketch {

// `read` runs in a forked child; its Matrix or kvsketch::Error comes back to the caller. A child
// that dies (a signal, a sanitizer's exit) throws Error naming `path` and `parser`.
Matrix read_isolated(const std::function<Matrix()>& read, const std::string& path, const char* parser);

}  // namespace kvsketch
