// Ctrl-C while a kernel runs: a host language's interpreter (Python) handles
// SIGINT by noting it and acting at its next instruction, which never comes
// while its main thread is inside a long kernel. An InterruptScope around a
// call into svod makes the call's kernels stoppable by SIGINT: the handler
// that install_interrupt_stop() puts before the one already there asks the
// innermost InterruptScope's StopScope to stop (kernel_stop.h: no lock, no
// allocation) and then calls the handler that was there before, so the
// interpreter still notes the interrupt and raises it (KeyboardInterrupt)
// once the stopped launch has failed. A kernel's launch outside any
// InterruptScope is not affected, and nor is anything but kernels: a copy or
// a collective still runs to its end.
#pragma once

#include "svod/guard/kernel_stop.h"

namespace svod {

// Installs the SIGINT handler once (later calls do nothing). The handler
// installed before it is called after it; SIG_DFL is applied by restoring
// it and raising the signal again, SIG_IGN does nothing.
void install_interrupt_stop();

// Makes the kernels launched on this thread during its lifetime stop at
// SIGINT. Only one is active at a time in a process (the first of nested or
// concurrent ones; the others do nothing), which is the interpreter's main
// thread in practice: it is the one whose interrupt is waited for.
class InterruptScope {
 public:
  InterruptScope() noexcept;
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  StopScope scope_;
  EnterStopScope enter_{scope_};
  bool active_ = false;
};

}  // namespace svod
