// Fault attribution for CPU kernels. While a kernel runs on a thread, a
// KernelFrame on that thread names it; a fault signal there (SIGSEGV, SIGBUS,
// SIGILL, SIGFPE, SIGABRT) prints one report to stderr — the program, the
// core_id slice, the plan op (running_op.h), the signal and faulting
// address, and which buffer argument the address falls in or after — and
// then goes on as the signal would have without svod: the handler that was
// installed before (Python's faulthandler, LLVM's crash recovery, a
// sanitizer's), else the default action, which ends the process (exit status
// 128 + the signal number). After a wild access the process cannot safely go
// on, so nothing tries to. Faults outside kernels go straight to the
// previous handler. Kernels run on an alternate signal stack too, so a stack
// overflow is reported like any other fault.
#pragma once

#include <cstdint>

#include "svod/guard/running_op.h"

namespace svod {

class CpuProgram;

struct KernelFrame {
  const CpuProgram* program;
  const uint64_t* args;  // the ABI words: buffer addresses, then scalars
  int64_t slice;         // the core_id slice, or -1 for a launch of one
  const RunningOp* op;   // the plan op, when a plan launched it
};

extern SVOD_HOT_THREAD_LOCAL const KernelFrame* running_kernel;

namespace detail {
extern SVOD_HOT_THREAD_LOCAL bool fault_stack_ready;
void prepare_fault_stack() noexcept;  // this thread's alternate signal stack
}  // namespace detail

// Sets the running kernel for its lifetime: two thread-local stores and a
// flag check when no fault happens.
class KernelFrameScope {
 public:
  explicit KernelFrameScope(const KernelFrame& frame) noexcept : previous_(running_kernel) {
    if (!detail::fault_stack_ready) [[unlikely]]
      detail::prepare_fault_stack();
    running_kernel = &frame;
  }
  ~KernelFrameScope() { running_kernel = previous_; }
  KernelFrameScope(const KernelFrameScope&) = delete;
  KernelFrameScope& operator=(const KernelFrameScope&) = delete;

 private:
  const KernelFrame* previous_;
};

// Installs the fault handler (and the exit() hook, once: kKernelExitStatus),
// or again when another handler (LLVM's crash recovery, enabled by the first
// in-process compile) was installed over it since; the one it replaces becomes the previous handler. Called for
// every CpuProgram made (one sigaction query when nothing changed).
void ensure_fault_reporting();

}  // namespace svod
