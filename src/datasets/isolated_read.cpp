#include "datasets/isolated_read.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/require.hpp"

namespace kvsketch {
namespace {

// Whole writes and reads over the pipe (a short count only where the other side is gone).
bool write_all(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t done = ::write(fd, p, n);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) return false;
    p += done;
    n -= static_cast<size_t>(done);
  }
  return true;
}

bool read_all(int fd, void* data, size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t done = ::read(fd, p, n);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) return false;
    p += done;
    n -= static_cast<size_t>(done);
  }
  return true;
}

// Child: u8 1, u64 rows, u64 cols, the values; or u8 0, u64 length, the message.
[[noreturn]] void run_child(int fd, const std::function<Matrix()>& read) {
  // A crash here is the parent's to report: no handler of the parent's (a sanitizer's, a fuzzer's)
  // runs in the child; it dies of the signal.
  for (const int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(signal, SIG_DFL);
  uint8_t ok = 1;
  std::string message;
  Matrix m;
  try {
    m = read();
  } catch (const std::exception& e) {
    ok = 0;
    message = e.what();
  }
  bool sent = write_all(fd, &ok, 1);
  if (ok) {
    const uint64_t shape[2] = {m.rows, m.cols};
    sent = sent && write_all(fd, shape, sizeof(shape)) && write_all(fd, m.values.data(), m.values.size() * 4);
  } else {
    const uint64_t length = message.size();
    sent = sent && write_all(fd, &length, 8) && write_all(fd, message.data(), message.size());
  }
  ::_exit(sent ? 0 : 1);  // no atexit handlers or destructors of the parent's state
}

}  // namespace

Matrix read_isolated(const std::function<Matrix()>& read, const std::string& path, const char* parser) {
  int fds[2];
  require(::pipe(fds) == 0, "read: cannot create a pipe for '{}': {}", path, std::strerror(errno));
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error(fmt::format("read: cannot start a process to read '{}': {}", path, std::strerror(errno)));
  }
  if (child == 0) {
    ::close(fds[0]);
    run_child(fds[1], read);
  }
  ::close(fds[1]);
  uint8_t ok = 0;
  Matrix m;
  std::string message;
  bool complete = read_all(fds[0], &ok, 1);
  if (complete && ok) {
    uint64_t shape[2] = {0, 0};
    complete = read_all(fds[0], shape, sizeof(shape)) && shape[1] != 0 && shape[0] <= SIZE_MAX / 4 / shape[1];
    if (complete) {
      m.rows = shape[0];
      m.cols = shape[1];
      m.values.resize(m.rows * m.cols);
      complete = read_all(fds[0], m.values.data(), m.values.size() * 4);
    }
  } else if (complete) {
    uint64_t length = 0;
    complete = read_all(fds[0], &length, 8) && length < (1u << 20);
    message.resize(complete ? length : 0);
    complete = complete && read_all(fds[0], message.data(), message.size());
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!complete || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string how = WIFSIGNALED(status) ? fmt::format("signal {}", WTERMSIG(status))
                                                : fmt::format("exit status {}", WEXITSTATUS(status));
    throw Error(fmt::format("'{}': {} failed on this file ({}): it is corrupt or not what it claims to be", path,
                            parser, how));
  }
  if (!ok) throw Error(message);
  return m;
}

}  // namespace kvsketch
