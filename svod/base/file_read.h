// Opening files whose names come from outside svod.
//
// A name in a plan file, a command line, an environment variable or a cache
// folder can name something that is not a file: a FIFO (whose open() waits
// for a writer and whose read() waits for data, so svod would hang), a device
// (/dev/zero never ends), a directory or a socket. Every file svod reads by
// such a name (plan, source, tune, .npy and package files, object cache
// entries) is opened here and only a regular file is accepted. The check never
// waits: the path is stat()ed first, so a device or a FIFO is not even opened,
// and then opened with O_NONBLOCK and fstat()ed, so a FIFO that takes the
// file's place between the two is refused rather than waited on. The
// descriptor handed out is back in blocking mode and close-on-exec.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace svod {

// An open file descriptor, closed with the object.
class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd) noexcept : fd_(fd) {}
  ~FileDescriptor() { close(); }
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  // Closes now; false when close() reported an error (it can report a
  // delayed write error). Closing a closed descriptor succeeds.
  bool close() noexcept;

 private:
  int fd_ = -1;
};

// What try_open_regular_file found at a path.
struct RegularFile {
  FileDescriptor fd;       // open for reading when the path names a regular file
  struct stat status {};   // the open file's, or what stat() found when it is not a regular file
  int error = 0;           // errno when the path could not be opened or stat()ed

  // The path exists but names something else: a FIFO, a device, a directory…
  bool not_regular() const noexcept { return !fd && error == 0; }
};

// Opens `path` for reading if it names a regular file, without ever waiting
// (see above). Never throws.
RegularFile try_open_regular_file(const std::filesystem::path& path) noexcept;

// What a file of this st_mode is, for messages: "a FIFO", "a directory", "a
// character device", "a block device", "a socket", "a regular file"…
std::string_view file_type_name(mode_t mode) noexcept;

// As try_open_regular_file, but throws Error(Io) naming the path and `what`
// it was meant to be ("plan file", ".npy file"): "{path}: cannot open the
// {what}: {reason}", or "{path}: the {what} is a FIFO, not a regular file".
// `status`, when given, receives the open file's fstat().
FileDescriptor open_regular_file(const std::filesystem::path& path, std::string_view what,
                                 struct stat* status = nullptr);

// Everything left to read from `fd` (the file at `path`, which messages name
// as `what`); Error(Io) when a read fails.
std::string read_to_end(const FileDescriptor& fd, const std::filesystem::path& path, std::string_view what);

// The whole regular file at `path`: open_regular_file, then read_to_end.
std::string read_regular_file(const std::filesystem::path& path, std::string_view what);

}  // namespace svod
