// SVOD_OP_TIMEOUT: the seconds one op (a plan op, or a kernel launched on
// its own) may run, kept by the process's watchdog (watchdog.h). When an op
// passes its deadline its StopScope is asked to stop it (kernel_stop.h): a
// CPU kernel is stopped in its own code and its launch fails with
// Error(Timeout), the process going on. What cannot be stopped that way (a
// kernel in a system call or a libc function for a second more, a copy, a
// host function, a device kernel) is named on stderr and the process ends
// with kOpTimeoutStatus (124): the caller sees a clear end instead of a
// hang. `svod run --isolate` turns that end into a report of the run
// (tools/svod/run.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "svod/guard/kernel_stop.h"
#include "svod/guard/running_op.h"
#include "svod/guard/watchdog.h"

namespace svod {

// SVOD_OP_TIMEOUT in seconds, read once; 0 when unset. Error(Validation)
// naming the variable when it is not a positive number.
double op_timeout_seconds();

// Starts the deadline of the op this thread runs now, unless the thread has
// one running already (a plan op's kernel): `title` is what the report names
// (op_title: "op 2 (layer3) kernel k", "kernel k" for a kernel launched on
// its own). The op runs in the deadline's stop scope, inside
// launch_stop_scope(): a plan op makes it its RunningOp's (scope()). Used
// only when op_timeout_seconds() > 0.
class OpDeadline {
 public:
  explicit OpDeadline(std::string title);
  ~OpDeadline();
  // The stop scope the deadline asks to stop; null when an outer deadline covers this op.
  const StopScope* scope() const noexcept;
  OpDeadline(const OpDeadline&) = delete;
  OpDeadline& operator=(const OpDeadline&) = delete;

 private:
  struct OpSlot* slot_ = nullptr;  // the thread's; null when an outer deadline covers this op
  std::optional<EnterStopScope> enter_;
};

}  // namespace svod
