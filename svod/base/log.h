// Diagnostics. The library never prints on its own: debug output appears
// only when SVOD_DEBUG is set (level 1 compiles, 2 launches, 3 sources, 4
// disassembly), warnings always; each is one line "svod: ..." on stderr, or
// a call of the sink an embedding program installed (log_sink.h).
// (Not spdlog: loading it was a quarter of the dynamic linker's work at every
// start of the process, for two dozen lines of output.)
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <string_view>
#include <utility>

namespace svod {

// SVOD_DEBUG, read once per process: 0 when unset, and 0 when malformed,
// being read where nothing may throw (as the library loads, in launches).
int debug_level() noexcept;
// Throws the Error(Validation) of a malformed SVOD_DEBUG. Every device's
// construction calls it, so the error comes when a process starts using svod.
void check_debug_level();

// Writes "svod: `message`\n" to stderr in one write, so lines from several
// threads do not interleave (or passes it to the sink, as a debug line).
void log_line(std::string_view message);

// How many warnings this process has logged.
size_t warnings_logged() noexcept;

template <typename... Args>
void log_debug(fmt::format_string<Args...> format, Args&&... args) {
  if (debug_level() > 0) log_line(fmt::format(format, std::forward<Args>(args)...));
}

void log_warning(std::string_view message);

template <typename... Args>
void log_warning(fmt::format_string<Args...> format, Args&&... args) {
  log_warning(std::string_view(fmt::format(format, std::forward<Args>(args)...)));
}

}  // namespace svod
