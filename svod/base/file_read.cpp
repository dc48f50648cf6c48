#include "svod/base/file_read.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "svod/base/error.h"

namespace svod {

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

bool FileDescriptor::close() noexcept {
  if (fd_ < 0) return true;
  const int fd = fd_;
  fd_ = -1;
  return ::close(fd) == 0;
}

RegularFile try_open_regular_file(const std::filesystem::path& path) noexcept {
  RegularFile file;
  // stat() first, so that a device or a FIFO is not even opened (opening a
  // device can have effects of its own).
  if (::stat(path.c_str(), &file.status) != 0) {
    file.error = errno;
    return file;
  }
  if (!S_ISREG(file.status.st_mode)) return file;
  // Something else can take the file's place before open(): O_NONBLOCK keeps
  // a FIFO's open() from waiting for a writer, and fstat() of what was opened
  // is the check that counts.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    file.error = errno;
    return file;
  }
  FileDescriptor opened(fd);
  if (::fstat(fd, &file.status) != 0) {
    file.error = errno;
    return file;
  }
  if (!S_ISREG(file.status.st_mode)) return file;
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    file.error = errno;
    return file;
  }
  file.fd = std::move(opened);
  return file;
}

std::string_view file_type_name(mode_t mode) noexcept {
  switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "an unknown kind of file";
  }
}

FileDescriptor open_regular_file(const std::filesystem::path& path, std::string_view what, struct stat* status) {
  RegularFile file = try_open_regular_file(path);
  if (file.error != 0)
    throw make_error(ErrorKind::Io, "{}: cannot open the {}: {}", path.string(), what, std::strerror(file.error));
  if (file.not_regular()) {
    throw make_error(ErrorKind::Io, "{}: the {} is {}, not a regular file", path.string(), what,
                     file_type_name(file.status.st_mode));
  }
  if (status != nullptr) *status = file.status;
  return std::move(file.fd);
}

std::string read_to_end(const FileDescriptor& fd, const std::filesystem::path& path, std::string_view what) {
  // The size is a hint: the file may grow or shrink meanwhile, and files in
  // /proc say 0. One byte more than it lets the read that finds the end fit.
  struct stat status {};
  size_t hint = 0;
  if (::fstat(fd.get(), &status) == 0 && status.st_size > 0) hint = static_cast<size_t>(status.st_size);
  std::string text(std::max<size_t>(hint + 1, 4096), '\0');
  size_t used = 0;
  for (;;) {
    if (used == text.size()) text.resize(text.size() * 2);
    const ssize_t n = ::read(fd.get(), text.data() + used, text.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw make_error(ErrorKind::Io, "{}: cannot read the {}: {}", path.string(), what, std::strerror(errno));
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  text.resize(used);
  return text;
}

std::string read_regular_file(const std::filesystem::path& path, std::string_view what) {
  return read_to_end(open_regular_file(path, what), path, what);
}

}  // namespace svod
