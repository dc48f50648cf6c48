#include "svod/backends/cpu/fault_policy.h"

#include <signal.h>

#include "svod/guard/kernel_stop.h"

namespace svod {

FaultAction decide_fault(const FaultSituation& s) noexcept {
  if (s.signal == kKernelStopSignal) {
    // A thread anywhere but the kernel's own code (even a leaf function it
    // called, which may hold a lock an asynchronous stop would abandon) goes
    // on until the next signal; so does a kernel the C library called back,
    // which returns to a frame of the library that may hold a lock.
    if (s.stop_requested)
      return s.machine_traps && s.pc_in_kernel && !s.called_back && !s.forked_child ? FaultAction::Stop
                                                                                    : FaultAction::LetRun;
    return s.sent_by_this_process ? FaultAction::LetRun : FaultAction::PassToPrevious;
  }
  if (s.handed_on) return FaultAction::EndProcess;
  if (s.in_launch) {
    // Only a fault an instruction of the kernel's own code caused, or a leaf
    // function it called or tail-called (memcpy, memset: they hold no lock),
    // is stopped there; a signal sent or raised is not. Nor is a fault in
    // code the C library called back (resuming would leave the library's
    // lock held), or in a child the kernel forked (it would go on running its
    // parent's program).
    const bool caused = s.code > 0 && s.signal != SIGABRT;
    if (s.machine_traps && caused && (s.pc_in_kernel || s.returns_to_kernel || s.tail_called) && !s.called_back &&
        !s.forked_child)
      return FaultAction::Trap;
    return FaultAction::ReportAndHandOn;
  }
  if (s.code > 0) {
    if (s.in_registered_code) return FaultAction::ReportProgramAndHandOn;
    // A memory fault on a device's host thread ends the process once handed
    // on. Any other signal may be one the device's runtime recovers from
    // (PoCL's own SIGFPE handler steps over a kernel's integer division by
    // zero), unless only the default action comes after svod's handler.
    const bool fatal = s.signal == SIGSEGV || s.signal == SIGBUS || s.only_default_after;
    if (s.kernels_in_flight && fatal) return FaultAction::ReportInFlightAndHandOn;
  }
  return FaultAction::HandOn;
}

}  // namespace svod
