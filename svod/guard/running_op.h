// The plan op a thread is running, for reports that only know the thread:
// the fault report of a kernel that crashes names the op it belongs to. A
// RunningOpScope sets it around an op's host work (a pointer store and
// restore).
#pragma once

#include <cstddef>
#include <string>

#include "svod/guard/op_name.h"

namespace svod {

// Built per op from constants (no loads): the op's id or label is looked up
// only when a report names the op.
class StopScope;

struct RunningOp {
  size_t index = 0;
  const void* plan = nullptr;
  // The op's id, else its label (may be empty), read from `plan` by its own
  // code.
  const std::string& (*id_or_label)(const void* plan, size_t index) = nullptr;
  // The stop scope the op runs in (kernel_stop.h), on whichever thread runs
  // it: that of the thread that runs the plan, or the op's deadline's.
  const StopScope* stop = nullptr;
};

// The op's name, "op 2 (layer3)" (op_name.h).
std::string op_name(const RunningOp& op);

// Thread-locals read on every launch: `__thread` (no initialisation guard)
// in the initial-exec model, one %fs-relative access where the general model
// calls __tls_get_addr (about 14 ns a launch, measured).
#define SVOD_HOT_THREAD_LOCAL __thread __attribute__((tls_model("initial-exec")))

extern SVOD_HOT_THREAD_LOCAL const RunningOp* running_op;
// The stop scope the calling thread is in (kernel_stop.h; null: none).
extern SVOD_HOT_THREAD_LOCAL const StopScope* stop_scope;

// The stop scope of a kernel launched on this thread now: the running plan
// op's, else the thread's.
inline const StopScope* launch_stop_scope() noexcept {
  return running_op != nullptr ? running_op->stop : stop_scope;
}

// How a process ends when a running op ends it:
// - a kernel called exit() (any status) where svod could not stop it at the
//   call (a shared library's kernel): the exit is reported and the process
//   ends at once with 70 (sysexits' EX_SOFTWARE) instead of running exit
//   handlers that would wait for the kernel's own thread
//   (backends/cpu/kernel_fault.h);
// - an op ran past SVOD_OP_TIMEOUT: 124, as timeout(1) (op_deadline.h).
inline constexpr int kKernelExitStatus = 70;
inline constexpr int kOpTimeoutStatus = 124;

class RunningOpScope {
 public:
  explicit RunningOpScope(const RunningOp& op) noexcept : previous_(running_op) { running_op = &op; }
  ~RunningOpScope() { running_op = previous_; }
  RunningOpScope(const RunningOpScope&) = delete;
  RunningOpScope& operator=(const RunningOpScope&) = delete;

 private:
  const RunningOp* previous_;
};

}  // namespace svod
