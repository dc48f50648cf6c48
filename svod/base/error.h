// svod::Error — the one exception type of the runtime.
//
// Every failure the runtime can diagnose is raised as an Error carrying an
// ErrorKind, so callers (and tests) can branch on what went wrong without
// parsing messages. Messages say what failed, where, and what to do about it.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
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
  KernelFault,        // a CPU kernel faulted (a signal) and was stopped: KernelFault
  SandboxViolation,   // a sandboxed kernel broke a rule of its sandbox (svod/sandbox) and was ended
};

// The last kind, for loops over every kind (new kinds are appended: the C
// API's status values follow this order).
inline constexpr ErrorKind kLastErrorKind = ErrorKind::SandboxViolation;

std::string_view to_string(ErrorKind kind) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message);
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

// What the fault handler saw when it stopped a kernel
// (svod/backends/cpu/kernel_fault.h), as data for callers that react to it.
struct KernelFaultInfo {
  int signal = 0;                      // SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGTRAP; 0: a call of exit() or its kin
  std::string signal_name;             // "SIGSEGV"
  std::optional<uint64_t> address;     // the faulting address, when the processor reports one
  std::string access;                  // "read", "write", or "" when unknown
  std::string cause;                   // "null pointer", "stack overflow", "out of bounds", "called _exit(0)", ...
  std::string program;                 // the program's display name
  std::string entry;                   // its entry symbol
  int64_t slice = -1;                  // the core_id slice, -1 for a launch of one
  std::optional<size_t> op;            // the plan op, when a plan launched it
  std::string op_label;                // its id, else its label ("" when none)
  std::optional<int> rank;             // the rank, when the plan has peers
  std::optional<size_t> buffer;        // the buffer argument the address falls in or near
  std::string buffer_name;
  std::optional<int64_t> element;      // the element of that buffer (negative: before its start)
  bool in_called_function = false;     // the fault was in a function the kernel called (memcpy, ...)
};

// A kernel that faulted and was stopped at the fault; the launch failed, the
// process goes on. what() is the report; info() the same as data.
class KernelFault : public Error {
 public:
  KernelFault(KernelFaultInfo info, const std::string& message)
      : Error(ErrorKind::KernelFault, message), info_(std::move(info)) {}
  const KernelFaultInfo& info() const noexcept { return info_; }

 private:
  KernelFaultInfo info_;
};

// Builds an Error with a fmt-style message: throw make_error(ErrorKind::Load, "...", x).
template <typename... Args>
Error make_error(ErrorKind kind, fmt::format_string<Args...> format, Args&&... args) {
  return Error(kind, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace svod
