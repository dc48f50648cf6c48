// A kernel's fault as plain data, and where its address lies relative to the
// launch's buffers. Pure functions of their arguments (no signals, no
// globals, no allocation), so the fault handler can call them and tests can
// check them without raising a signal; only place_of asks the table of
// guarded allocations.
#pragma once

#include <signal.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "svod/guard/guarded_memory.h"
#include "svod/guard/running_op.h"
#include "svod/program/program_spec.h"

namespace svod {

// How the faulting instruction touched memory, where the processor says so
// (the page-fault error code on x86-64).
enum class MemoryAccess : uint8_t { Unknown, Read, Write };

// What the handler saw when it trapped a fault. Only call_cause has a
// default: a KernelFrame on every launch leaves the rest unwritten (make one
// with TrappedFault{} for all zero).
struct TrappedFault {
  int signal;
  int code;          // si_code
  uint64_t address;  // si_addr
  uint64_t pc;       // the faulting instruction
  uint64_t sp;       // the stack pointer at the fault
  MemoryAccess access;
  bool in_callee;    // the pc is in a function the kernel called, not in its own code
  // A call that would have ended the process ("called _exit(0)", "failed an
  // assertion: ..."; signal 0) or its thread (call_ends_thread: "called
  // pthread_exit()"): the kernel was stopped at the call (route_kernel_exits).
  const char* call_cause = nullptr;
  bool call_ends_thread = false;
};

// A launch as the reports name it and locate() reads it: the fields of a
// KernelFrame and its program that matter, as plain data (launch_view makes
// one from a frame).
struct LaunchView {
  std::string_view program;             // the program's display name
  std::string_view entry;
  std::span<const BufferParam> buffers;  // the buffer parameters, in ABI order
  const uint64_t* args = nullptr;        // the ABI words: the buffers' addresses first
  int64_t slice = -1;                    // the core_id slice, or -1 for a launch of one
  const RunningOp* op = nullptr;         // the plan op, when a plan launched it
};

// Whether the fault comes with the address it touched. A general-protection
// fault (x86-64: a non-canonical address, such as a garbage pointer or a
// wildly overflowed index, or a misaligned SSE access) comes with none.
inline bool address_known(const TrappedFault& f) noexcept {
  return (f.signal == SIGSEGV || f.signal == SIGBUS) && f.code != SI_KERNEL;
}

// The element of `size` bytes that holds the byte at `offset` from a buffer's
// start; negative before it (-1 for the element just before).
inline int64_t element_at(int64_t offset, size_t size) {
  const auto s = static_cast<int64_t>(size);
  return offset >= 0 ? offset / s : -((-offset + s - 1) / s);
}

// Stack overflows fault just below the stack pointer (a push, a probe of a
// new frame); the kernel's buffers are never there.
inline constexpr uint64_t kStackReach = 64 * 1024;
inline bool below_stack_pointer(uint64_t address, uint64_t sp) noexcept {
  return sp != 0 && address < sp + 256 && address + kStackReach > sp;
}

// The buffer argument that starts in [data, data + bytes] (the guarded
// allocation hit), preferring one that starts at `data`; -1 for none.
int argument_in(const LaunchView& launch, uint64_t data, uint64_t bytes) noexcept;

// Where a faulting address lies relative to the kernel's arguments, as data:
// rendered into the report and into KernelFaultInfo alike.
struct Place {
  enum Kind { Null, Stack, Guarded, Fenced, Past, BeforeAll } kind = BeforeAll;
  int buffer = -1;       // the argument it falls in or after (-1: none)
  uint64_t offset = 0;   // Past: bytes past the argument's start; Guarded, Fenced: bytes past the end or before the start
  bool element_known = false;
  int64_t element = 0;   // negative: before the start
  GuardHit hit{};        // Guarded, Fenced: the allocation
  uint64_t extent = 0;   // Guarded, Fenced: bytes from the argument's start to the allocation's end
};

// Where `address` lies, for a fault with the stack pointer `sp`: the first
// page, just below the stack pointer, in the guards of `guard` (the guarded
// allocation find_guard found there, or null), past the start of the nearest
// buffer below it, or before every buffer.
Place locate(const LaunchView& launch, uint64_t address, uint64_t sp, const GuardHit* guard) noexcept;

// locate() for a fault with an address, asking the table of guarded
// allocations (async-signal-safe); nullopt for a fault without one.
std::optional<Place> place_of(const LaunchView& launch, const TrappedFault& f) noexcept;

// KernelFaultInfo::cause for a memory fault at `place`.
std::string_view cause_of(Place::Kind place) noexcept;
// KernelFaultInfo::cause for a fault without an address.
std::string_view cause_without_address(int signal) noexcept;

}  // namespace svod
