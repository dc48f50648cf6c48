#include "svod/sandbox/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "svod/base/error.h"

namespace svod::sandbox {
namespace {

[[noreturn]] void throw_errno(ErrorKind kind, std::string_view what) {
  throw make_error(kind, "sandbox: {}: {}", what, std::strerror(errno));
}

}  // namespace

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

Fd shared_file(const char* name, size_t bytes) {
  const int fd = ::memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) throw_errno(ErrorKind::Unsupported, "memfd_create");
  const int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
  ::close(fd);
  if (high < 0) throw_errno(ErrorKind::Io, "fcntl");
  Fd file(high);
  if (::ftruncate(file.get(), static_cast<off_t>(bytes)) != 0) throw_errno(ErrorKind::Io, "ftruncate of shared memory");
  return file;
}

Mapping::Mapping(const Fd& fd, size_t bytes) : bytes(bytes) {
  if (bytes == 0) return;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) throw_errno(ErrorKind::Unsupported, "mapping shared memory");
  base = static_cast<std::byte*>(p);
}

Mapping::~Mapping() {
  if (base != nullptr) ::munmap(base, bytes);
}

}  // namespace svod::sandbox
