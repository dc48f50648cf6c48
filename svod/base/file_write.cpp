#include "svod/base/file_write.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "svod/base/error.h"

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

}  // namespace

void write_file_atomically(const std::filesystem::path& path, std::initializer_list<std::span<const std::byte>> parts) {
  // The pid and a counter make the temporary name unique among processes and
  // threads; it lies beside the destination so that rename() is atomic.
  static std::atomic<uint64_t> counter{0};
  std::filesystem::path temp = path;
  temp += fmt::format(".tmp.{}.{}", ::getpid(), counter.fetch_add(1));

  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw make_error(ErrorKind::Io, "cannot write {}: {}", path.string(), std::strerror(errno));
  bool ok = true;
  for (const auto& part : parts) ok = ok && write_all(fd, part);
  int saved = ok ? 0 : errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    saved = errno;
  }
  if (ok && std::rename(temp.c_str(), path.c_str()) != 0) {
    ok = false;
    saved = errno;
  }
  if (!ok) {
    ::unlink(temp.c_str());
    throw make_error(ErrorKind::Io, "cannot write {}: {}", path.string(), std::strerror(saved));
  }
}

}  // namespace svod
