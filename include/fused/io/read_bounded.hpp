// Reading a source whose end may never come (a device such as /dev/zero, `yes |` on a pipe, a FIFO
// that nobody writes): by read(2), in chunks, up to a limit, a read error told apart from the end.
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

namespace fused::io {

// What reading a source gave: its bytes, or why they stop short.
struct read_result {
  std::string bytes;
  bool too_large = false;  // it holds more than the limit (bytes then holds what was read)
  int open_error = 0;      // errno of a failed open (ENOENT, ELOOP), 0 when none
  int read_error = 0;      // errno of a failed read (EISDIR, EIO), 0 when none
  bool unwritten_fifo = false;  // a named FIFO that gave no byte: no process had it open to write
};

// Why `r` holds no text to use, as the words after the source's name ("cannot open: No such file or
// directory"), or empty when it holds all of it; `what` names the text ("the prompt file") where the
// source's name does not. Too large is the caller's to say: its limit means something only there.
inline std::string failure(const read_result& r, std::string_view what = {}) {
  const std::string object = what.empty() ? std::string{} : " " + std::string(what);
  if (r.open_error) return "cannot open" + object + ": " + std::strerror(r.open_error);
  if (r.read_error) return "cannot read" + object + ": " + std::strerror(r.read_error);
  if (r.unwritten_fifo) return (what.empty() ? std::string("an") : std::string(what) + " is an") + " empty FIFO (had a process opened it to write?)";
  return {};
}

// All of file descriptor fd, or too_large as soon as it holds more than max_bytes. A read error is
// reported (std::istream took one, a directory on standard input say, for the end).
inline read_result read_fd_at_most(int fd, std::size_t max_bytes) {
  read_result r;
  char chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      r.read_error = errno;
      return r;
    }
    if (n == 0) return r;
    if (r.bytes.size() + static_cast<std::size_t>(n) > max_bytes) {
      r.too_large = true;
      return r;
    }
    r.bytes.append(chunk, static_cast<std::size_t>(n));
  }
}

// The file at `path`, as read_fd_at_most reads it. Opened without blocking, then read blocking: a FIFO
// that a process writes (`<(...)`) is read as it comes, and one that no process has open to write is
// unwritten_fifo at once instead of a wait for a writer that may never come.
inline read_result read_file_at_most(const std::filesystem::path& path, std::size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  read_result r;
  if (fd < 0) {
    r.open_error = errno;
    return r;
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags == -1 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == -1) r.open_error = errno;
  else r = read_fd_at_most(fd, max_bytes);
  // A named FIFO, not a pipe (`<(true)` is one, opened by its writer: empty is what it wrote).
  struct stat st {};
  char link[32] = {};
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  r.unwritten_fifo = r.bytes.empty() && !r.read_error && ::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) &&
                     !(::readlink(self.c_str(), link, sizeof link - 1) > 0 && std::string_view(link).starts_with("pipe:"));
  ::close(fd);
  return r;
}

}  // namespace fused::io
