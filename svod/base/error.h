// svod::Error — the one exception type of the runtime.
//
// Every failure the runtime can diagnose is raised as an Error carrying an
// ErrorKind, so callers (and tests) can branch on what went wrong without
// parsing messages. Messages say what failed, where, and what to do about it.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace svod {

enum class ErrorKind {
  Validation,         // bad arguments or specs: counts, sizes, bounds, names
  Compile,            // the compiler rejected the source (diagnostics attached)
  Load,               // malformed or unsupported object, relocation, section
  UndefinedSymbol,    // a symbol the object needs (or its entry) is missing
  Unsupported,        // valid request the runtime cannot serve here
  DeviceUnavailable,  // device, driver or toolchain not present
  Execution,          // a kernel, copy or host function failed while running
  PlanPoisoned,       // a plan failed mid-run and must be rebuilt
  Timeout,            // a process or operation ran past its time limit
  Io,                 // files, pipes, processes
  Internal,           // a broken invariant inside svod (a bug)
};

std::string_view to_string(ErrorKind kind) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message);
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

// Builds an Error with a fmt-style message: throw make_error(ErrorKind::Load, "...", x).
template <typename... Args>
Error make_error(ErrorKind kind, fmt::format_string<Args...> format, Args&&... args) {
  return Error(kind, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace svod
