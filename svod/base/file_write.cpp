#include "svod/base/file_write.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "svod/base/error.h"
#include "svod/base/file_read.h"

namespace svod {

namespace {

// Writes all of `bytes` to `fd`, retrying short writes and interrupts.
bool write_all(int fd, std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    bytes = bytes.subspan(static_cast<size_t>(n));
  }
  return true;
}

// Writes every part to `fd` and closes it; 0, or the errno of the write or
// the close that failed (close can report a delayed write error).
int write_parts_and_close(int fd, std::initializer_list<std::span<const std::byte>> parts) {
  bool ok = true;
  for (const auto& part : parts) ok = ok && write_all(fd, part);
  const int saved = ok ? 0 : errno;
  if (::close(fd) != 0 && ok) return errno;
  return saved;
}

// Opens the FIFO at `path` for writing once a reader has it open: O_NONBLOCK
// makes open() fail with ENXIO instead of waiting while no process reads it.
// A reader started beside svod (`cat fifo &`) may open it a moment later, so
// the open is tried again for kFifoReaderWait; after that the FIFO has no
// reader and the write fails. The descriptor is back in blocking mode.
int open_fifo_for_writing(const std::filesystem::path& path) {
  const auto give_up = std::chrono::steady_clock::now() + kFifoReaderWait;
  for (;;) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd >= 0) {
      const int flags = ::fcntl(fd, F_GETFL);
      if (flags >= 0 && ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0) return fd;
      const int error = errno;
      ::close(fd);
      errno = error;
      return -1;
    }
    if (errno != ENXIO) return -1;
    if (std::chrono::steady_clock::now() >= give_up)
      throw make_error(ErrorKind::Io, "cannot write {}: the FIFO has no reader (none opened it within {} s)",
                       path.string(), std::chrono::duration_cast<std::chrono::seconds>(kFifoReaderWait).count());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// Writes `parts` into the character device or FIFO at `path` as it is (a
// rename would replace the node itself: /dev/null with a regular file).
void write_through(const std::filesystem::path& path, bool fifo,
                   std::initializer_list<std::span<const std::byte>> parts) {
  const int fd = fifo ? open_fifo_for_writing(path) : ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw make_error(ErrorKind::Io, "cannot write {}: {}", path.string(), std::strerror(errno));
  if (const int error = write_parts_and_close(fd, parts); error != 0)
    throw make_error(ErrorKind::Io, "cannot write {}: {}", path.string(), std::strerror(error));
}

// Where write_file_atomically puts the bytes of `path`, judged by what is
// there already: a character device or a pipe is written through, a symbolic
// link keeps pointing at the file that replaces its target, anything else but
// a regular file is refused.
struct Destination {
  bool through = false;  // write into the node as it is
  bool fifo = false;     // the node is a FIFO
  std::filesystem::path target;
};

Destination destination(const std::filesystem::path& path) {
  Destination destination{false, false, path};
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return {true, S_ISFIFO(st.st_mode), path};
    if (!S_ISREG(st.st_mode))
      throw make_error(ErrorKind::Io, "cannot write {}: it is {} (svod writes regular files, character devices and pipes)",
                       path.string(), file_type_name(st.st_mode));
    std::error_code error;
    if (std::filesystem::is_symlink(path, error)) destination.target = std::filesystem::canonical(path, error);
    if (error) throw make_error(ErrorKind::Io, "cannot write {}: {}", path.string(), error.message());
  }
  return destination;
}

}  // namespace

void check_writable(const std::filesystem::path& path) {
  const Destination where = destination(path);
  if (where.through) {
    if (::access(path.c_str(), W_OK) != 0)
      throw make_error(ErrorKind::Io, "cannot write {}: {}", path.string(), std::strerror(errno));
    return;
  }
  const std::filesystem::path folder = where.target.has_parent_path() ? where.target.parent_path() : ".";
  struct stat st {};
  if (::stat(folder.c_str(), &st) != 0 || (S_ISDIR(st.st_mode) && ::access(folder.c_str(), W_OK | X_OK) != 0))
    throw make_error(ErrorKind::Io, "cannot write {}: the folder {}: {}", path.string(), folder.string(),
                     std::strerror(errno));
  if (!S_ISDIR(st.st_mode))
    throw make_error(ErrorKind::Io, "cannot write {}: {} is {}, not a folder", path.string(), folder.string(),
                     file_type_name(st.st_mode));
}

namespace {

// Writes `parts` to a new file beside `target` and renames it over `target`;
// errors name `path`, the name the caller gave.
void write_and_rename(const std::filesystem::path& path, const std::filesystem::path& target,
                      std::initializer_list<std::span<const std::byte>> parts) {
  // The pid and a counter make the temporary name unique among processes and
  // threads; it lies beside the destination so that rename() is atomic.
  static std::atomic<uint64_t> counter{0};
  std::filesystem::path temp = target;
  temp += fmt::format(".tmp.{}.{}", ::getpid(), counter.fetch_add(1));

  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw make_error(ErrorKind::Io, "cannot write {}: {}", path.string(), std::strerror(errno));
  int error = write_parts_and_close(fd, parts);
  if (error == 0 && std::rename(temp.c_str(), target.c_str()) != 0) error = errno;
  if (error != 0) {
    ::unlink(temp.c_str());
    throw make_error(ErrorKind::Io, "cannot write {}: {}", path.string(), std::strerror(error));
  }
}

}  // namespace

void write_file_atomically(const std::filesystem::path& path, std::initializer_list<std::span<const std::byte>> parts) {
  const Destination where = destination(path);
  if (where.through) return write_through(path, where.fifo, parts);
  write_and_rename(path, where.target, parts);
}

void replace_file_atomically(const std::filesystem::path& path, std::string_view text) {
  write_and_rename(path, path, {std::as_bytes(std::span(text.data(), text.size()))});
}

}  // namespace svod
