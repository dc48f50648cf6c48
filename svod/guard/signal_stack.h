// An alternate signal stack for the calling thread. A signal handler runs on
// the stack of the thread the signal hit unless that thread has an alternate
// one; when the signal is a stack overflow there is no room left, and the
// process dies without its handler running. Threads that run code which may
// exhaust its stack (kernels, the in-process compiler) call
// ensure_signal_stack() first; the stack is unmapped when the thread ends.
#pragma once

namespace svod {

// Gives this thread a 64 KiB alternate signal stack unless it has one (its
// own or another's). Without memory for it, nothing changes: faults are still
// handled, stack overflows not.
void ensure_signal_stack() noexcept;

}  // namespace svod
