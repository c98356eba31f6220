// A progress line on stderr for long commands, shown only when stderr is a terminal (never in
// pipes, logs or --json runs), overwritten in place and cleared when the work is done.
#pragma once
#include <string>

namespace kvsketch::tools {

class Progress {
 public:
  // enabled: the caller's own condition (false for --json); the terminal test is added to it.
  Progress(bool enabled, size_t total);
  ~Progress();
  // Shows "[done/total] what".
  void step(const std::string& what);

 private:
  bool enabled_;
  size_t total_, done_ = 0;
};

}  // namespace kvsketch::tools
