// What svod's signal handlers do with a signal, decided by one pure function
// of the situation the handler observed (fault_handler.cpp gathers it and
// acts on the answer; fault_report.h words the reports). Kept apart from the
// signal mechanism so the rules read in one place and are tested without
// raising a signal.
#pragma once

namespace svod {

enum class FaultAction {
  // Record the fault in the kernel's frame and resume at the launch
  // boundary: the launch throws KernelFault.
  Trap,
  // Resume at the launch boundary for the stop scope that asked: the launch
  // throws the scope's error.
  Stop,
  // Do nothing: a stop signal that found the kernel outside its own code
  // (the next one may find it inside), or one svod sent that no scope asks
  // for any more.
  LetRun,
  // A running kernel's fault that cannot be trapped: report it, then hand it on.
  ReportAndHandOn,
  // A fault in a registered program's code on a thread that runs no launch:
  // report it naming the program (the first such report only), then hand it on.
  ReportProgramAndHandOn,
  // A fault on a thread svod did not start while device kernels run on host
  // threads: report it naming them (once per process), then hand it on.
  ReportInFlightAndHandOn,
  // Not svod's fault: put back the handler that was there before svod's and
  // let the signal happen again under it.
  HandOn,
  // A stop signal svod did not send: call the handler that was there before
  // svod's with it (svod's stays).
  PassToPrevious,
  // A kernel's fault was handed on already and the signal came back (a
  // handler that re-raises): end the process with the default action.
  EndProcess,
};

// What the handler knows when a signal arrives. A field the handler did not
// need to look at for the situation stays false.
struct FaultSituation {
  int signal = 0;
  int code = 0;                       // si_code: > 0 when an instruction caused the signal
  bool machine_traps = false;         // this machine has a trampoline (trap_machine.h)
  bool handed_on = false;             // a kernel's fault was already handed on
  bool in_launch = false;             // a KernelFrame is set on the thread
  bool pc_in_kernel = false;          // the pc is in the running kernel's own code
  bool returns_to_kernel = false;     // the pc is in a leaf function the running kernel called
  bool tail_called = false;           // the pc is in a function the kernel jumped to as its last call,
                                      // which has saved nothing yet (the stack pointer is the kernel's at entry)
  bool stop_requested = false;        // a stop scope around the running launch asks it to stop
  bool sent_by_this_process = false;  // the signal was sent by tgkill from this process
  bool in_registered_code = false;    // no launch: the pc is in a registered program's code
  bool kernels_in_flight = false;     // no launch: device kernels run on host threads
  bool only_default_after = false;    // the handler before svod's is the default action (or ignores)
  bool called_back = false;           // a C-library frame lies between the kernel's entry and the pc: the C
                                      // library called the kernel's code back (fopencookie, dl_iterate_phdr)
                                      // and may hold a lock the process needs again
  bool forked_child = false;          // this process is a child the running kernel forked: it must not go on
                                      // as its parent
};

FaultAction decide_fault(const FaultSituation& s) noexcept;

}  // namespace svod
