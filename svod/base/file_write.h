// Writing a whole file so that readers never see part of it.
//
// Every file svod produces for later reading (.npy outputs, packages, traces,
// tuning results, plots) goes through write_file_atomically: the bytes are
// written to a temporary name in the destination folder and renamed over the
// destination only when complete, so a failure or a crash leaves either the
// old file or none, never a truncated one. Concurrent writers of one path each
// use their own temporary name; the last rename wins. A path that names a
// character device or a pipe (/dev/null, /dev/stdout, a FIFO) is written
// through instead (a FIFO once a reader has it open: a FIFO that no process
// opens for reading within kFifoReaderWait is an error, never a wait for
// ever), one through a symbolic link replaces the file the link names, and
// any other non-regular file (a directory, a block device, a socket) is
// refused: the node itself is never replaced.
//
// Files svod owns (the object cache's entries) are written with
// replace_file_atomically instead: whatever has the name — a FIFO, a device,
// a symbolic link — is replaced by the rename, never opened or followed, so
// nothing planted in the folder makes svod wait or write elsewhere.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <initializer_list>
#include <span>
#include <string_view>

namespace svod {

// How long a write through a FIFO waits for a reader to open it.
inline constexpr std::chrono::milliseconds kFifoReaderWait{2000};

// Writes the concatenation of `parts` to `path`. Throws Error(Io) naming the
// path and the reason; the temporary file is removed on failure.
void write_file_atomically(const std::filesystem::path& path, std::initializer_list<std::span<const std::byte>> parts);

// Throws the Error(Io) write_file_atomically(path, ...) would throw before
// writing a byte, judged now (the folder missing or not writable, a
// directory at `path`), so that a command can refuse an output path before
// its work rather than after it.
void check_writable(const std::filesystem::path& path);

inline void write_file_atomically(const std::filesystem::path& path, std::string_view text) {
  write_file_atomically(path, {std::as_bytes(std::span(text.data(), text.size()))});
}

// Writes `text` to a temporary name beside `path` and renames it over
// whatever has that name (see above). Throws Error(Io) naming the path; a
// directory at `path` is not replaced (rename refuses).
void replace_file_atomically(const std::filesystem::path& path, std::string_view text);

}  // namespace svod
