// The texts of kernel faults and stops: the report the fault handler writes
// to stderr before the process ends, and the messages of the errors a launch
// throws afterwards. Built into a fixed array by pure functions of plain data
// (fault_location.h), because a signal handler may not allocate: no signals,
// no globals, so tests check every text without raising a signal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "svod/backends/cpu/fault_location.h"

namespace svod {

// Text built in a fixed array (what does not fit is left out).
class Report {
 public:
  Report& operator<<(std::string_view s) noexcept {
    for (char c : s)
      if (used_ < sizeof text_) text_[used_++] = c;
    return *this;
  }
  Report& number(uint64_t v) noexcept;
  Report& hex(uint64_t v) noexcept;
  std::string_view text() const noexcept { return {text_, used_}; }
  std::string str() const { return std::string(text()); }

 private:
  char text_[4096];
  size_t used_ = 0;
};

// "SIGSEGV"; "a fatal signal" for a signal svod does not handle.
std::string_view signal_name(int signal) noexcept;
// "SIGSEGV (invalid memory access)".
std::string_view describe_signal(int signal) noexcept;

// "program "f" (entry f) on CPU, core_id slice 1, op 0 (x)".
void name_launch(Report& r, const LaunchView& launch);

// "kernel fault: SIGSEGV (invalid memory access) at address 0x10\n  in
// program "f" (entry f) on CPU, core_id slice 1, op 0 (x)\n" and where
// the address lies: `place`, from place_of (null for a fault without an
// address).
void describe_fault(Report& r, const LaunchView& launch, const TrappedFault& f, const Place* place);

// Why a running kernel's fault was not stopped there.
enum class NotStopped : uint8_t {
  NotOwnCode,   // outside the kernel's own code and its leaf calls, or a signal sent or raised
  NoTrampoline, // this machine has none (trap_machine.h)
  CalledBack,   // in kernel code the C library called back
  ForkedChild,  // in a child process the kernel forked
};

// The handler's report of a running kernel's fault it hands on (the process
// ends), saying why it was not stopped.
void describe_handed_on(Report& r, const LaunchView& launch, const TrappedFault& f, const Place* place, NotStopped why);

// What the handler knows of a fatal signal that no report above covers (a
// signal outside any kernel in a process where kernels ran, or one in a
// launch whose frame a kernel overwrote): the signal, the
// program launched last in the process (null: unknown), the plan op running
// on the signal's thread (null: none).
struct Death {
  TrappedFault fault;
  const char* last_program = nullptr;
  const RunningOp* op = nullptr;
  bool frame_overwritten = false;  // a kernel runs on the thread, and its launch's frame is overwritten
};
// "svod: fatal signal: SIGABRT ... outside any kernel", the last program,
// what the signal suggests (heap corruption, a smashed stack) and what to
// rerun with.
void describe_death(Report& r, const Death& d);

// The handler's report of a fault in the code of `program` on a thread that
// runs no launch (register_kernel_code).
void describe_unlaunched(Report& r, const char* program, const TrappedFault& f);

// The handler's report of a fault on a thread svod did not start while device
// kernels ran on host threads: `for_each_kernel` lists their notes
// (for_each_kernel_in_flight).
using KernelLister = size_t (*)(void (*each)(const char* note, void* context), void* context);
void describe_in_flight(Report& r, const TrappedFault& f, KernelLister for_each_kernel);

// The report of a kernel that called exit() where svod could not stop it at
// the call: the process ends at once with `status`.
void describe_exit(Report& r, const LaunchView& launch, int status);

// The messages of what a launch throws: a KernelFault for a trapped fault,
// the stop scope's error for a kernel stopped for `reason`.
void describe_trapped(Report& r, const LaunchView& launch, const TrappedFault& f, const Place* place);
void describe_stopped(Report& r, const LaunchView& launch, std::string_view reason);

}  // namespace svod
