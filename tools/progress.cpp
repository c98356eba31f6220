#include "progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace kvsketch::tools {

Progress::Progress(bool enabled, size_t total) : enabled_(enabled && isatty(STDERR_FILENO)), total_(total) {}

Progress::~Progress() {
  if (enabled_) std::fputs("\r\033[K", stderr);
}

void Progress::step(const std::string& what) {
  ++done_;
  if (!enabled_) return;
  std::fputs(fmt::format("\r\033[K[{}/{}] {}", done_, total_, what).c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace kvsketch::tools
