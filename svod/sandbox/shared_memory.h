// The files a sandboxed plan shares with its helper (sandbox.cpp): memfds
// held at descriptors of their own, and shared mappings of them.
#pragma once

#include <cstddef>
#include <utility>

namespace svod::sandbox {

// A descriptor this process owns, at 10 or above so that the helper's file
// actions (which put the files at 3, 4 and 5) never overwrite one another.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~Fd();
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

// A new memfd of `bytes` zero bytes named `name` (close-on-exec).
// Error(Unsupported) where memfds cannot be made, Error(Io) otherwise.
Fd shared_file(const char* name, size_t bytes);

// A shared read-write mapping of a file, unmapped with the last owner (the
// plan's buffers keep the arena's alive). Error(Unsupported) when it cannot
// be mapped.
struct Mapping {
  Mapping(const Fd& fd, size_t bytes);
  ~Mapping();
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  std::byte* base = nullptr;
  size_t bytes;
};

}  // namespace svod::sandbox
