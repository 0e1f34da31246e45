// Files written whole or not at all: the bytes go to a temporary file beside the target, which is
// renamed over it once they are all on disk. A full disk, a signal or a crash leaves the old file
// as it was (a checkpoint trained over in place, a results file), never part of a new one.
#pragma once
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fused::io {

// One file to be replaced: write() fills a temporary beside it, commit() renames that over it; a
// pending_file destroyed before commit() removes its temporary. A target that exists and is not a
// regular file (a device, a pipe) is written in place: it cannot be replaced. A name of a descriptor
// the process holds (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N) is written through that
// descriptor, as the shell's redirection meant: opened anew, the file behind `>> log` would have been
// replaced, its earlier lines lost. A link is written through, to the file it names (made if it is
// not there yet). Errors are std::runtime_error naming the target and the reason.
class pending_file {
 public:
  explicit pending_file(std::filesystem::path target) : target_(std::move(target)), inherited_(inherited_descriptor(target_)) {
    struct stat st {};
    if (inherited_ >= 0) {
      in_place_ = true;
    } else if (::stat(target_.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) fail("is a directory");
      in_place_ = !S_ISREG(st.st_mode);
      fifo_ = S_ISFIFO(st.st_mode);
      if (!in_place_) final_ = link_target(target_);
    } else if (errno == ENOENT) {
      final_ = link_target(target_);  // a link to a file not there yet: made there
    }
    if (final_.empty()) final_ = target_;
    static std::atomic<unsigned> counter{0};
    temp_ = in_place_ ? final_
                      : final_.parent_path() / ("." + final_.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                                                std::to_string(counter.fetch_add(1)));
  }
  pending_file(const pending_file&) = delete;
  pending_file& operator=(const pending_file&) = delete;
  ~pending_file() {
    if (written_ && !committed_ && !in_place_) ::unlink(temp_.c_str());
  }

  // The whole file's bytes (a second call replaces the first's, but on an inherited descriptor follows it).
  void write(std::span<const std::byte> bytes) {
    if (inherited_ >= 0) {
      written_ = true;
      std::fflush(inherited_ == 2 ? stderr : stdout);  // what the process printed there comes first
      write_all(inherited_, bytes, false);
      return;
    }
    // In place without blocking: a FIFO that no process reads would hold the open forever (ENXIO
    // instead); then blocking again, so that a reader that is slow is waited for.
    const int fd = in_place_ ? ::open(temp_.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC | O_NONBLOCK)
                             : ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | (written_ ? 0 : O_EXCL), 0666);
    if (fd < 0 && errno == ENXIO && fifo_) fail("is a FIFO that no process reads");
    if (fd < 0) fail("cannot write", errno);
    if (in_place_) {
      const int flags = ::fcntl(fd, F_GETFL);
      if (flags == -1 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == -1) {
        const int why = errno;
        ::close(fd);
        fail("cannot write", why);
      }
    }
    written_ = true;
    write_all(fd, bytes, true);
    // On disk before the rename: else a crash could leave the new name with no data behind it.
    if (!in_place_ && ::fsync(fd) != 0) {
      const int why = errno;
      ::close(fd);
      fail("cannot write", why);
    }
    if (::close(fd) != 0) fail("cannot write", errno);
  }
  void commit() {
    if (!written_) throw std::logic_error("pending_file::commit before write");
    if (!in_place_ && std::rename(temp_.c_str(), final_.c_str()) != 0) fail("cannot replace it", errno);
    committed_ = true;
  }
  const std::filesystem::path& target() const { return target_; }

 private:
  // N for /dev/stdout (1), /dev/stderr (2), /dev/fd/N and /proc/self/fd/N; -1 for any other name.
  static int inherited_descriptor(const std::filesystem::path& p) {
    const std::string name = p.lexically_normal().string();
    if (name == "/dev/stdout") return 1;
    if (name == "/dev/stderr") return 2;
    for (const std::string_view prefix : {"/dev/fd/", "/proc/self/fd/"})
      if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
          name.find_first_not_of("0123456789", prefix.size()) == std::string::npos && name.size() - prefix.size() < 9)
        return std::stoi(name.substr(prefix.size()));
    return -1;
  }
  // The file a name reaches through its chain of links (the name itself when it is no link): the
  // bytes go there and the links stay, as the shell's `>` writes (a rename over a link would replace
  // the link itself, and leave the file it named as it was).
  static std::filesystem::path link_target(const std::filesystem::path& p) {
    std::error_code ec;
    std::filesystem::path at = p;
    for (int hop = 0; hop < 40 && std::filesystem::is_symlink(at, ec); ++hop) {
      const std::filesystem::path to = std::filesystem::read_symlink(at, ec);
      if (ec) return p;
      at = to.is_absolute() ? to : at.parent_path() / to;
    }
    return at;
  }
  // All of bytes to fd; a failure closes it when `owned` and is thrown.
  void write_all(int fd, std::span<const std::byte> bytes, bool owned) const {
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ::ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int why = n < 0 ? errno : ENOSPC;
        if (owned) ::close(fd);
        fail("cannot write", why);
      }
      done += static_cast<std::size_t>(n);
    }
  }
  [[noreturn]] void fail(const char* what, int why = 0) const {
    throw std::runtime_error(target_.string() + ": " + what + (why ? std::string(": ") + std::strerror(why) : std::string()));
  }

  std::filesystem::path target_, final_, temp_;
  int inherited_ = -1;  // the descriptor a name such as /dev/stdout stands for, or -1
  bool in_place_ = false, fifo_ = false, written_ = false, committed_ = false;
};

// `bytes` as the whole of `path`, replacing what was there only once they are all written.
inline void replace_file(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  pending_file f(path);
  f.write(bytes);
  f.commit();
}

}  // namespace fused::io
