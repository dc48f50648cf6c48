// Which fault handler sees a kernel's fault first. svod's kernel fault
// handler (backends/cpu/kernel_fault.h) must be the process's current one to
// stop a faulting kernel; code that installs handlers of its own over it (the
// in-process compiler's crash recovery, opened at its first compile) calls
// note_fault_handlers_changed(), and the next kernel launch on each thread
// puts svod's back on top. A launch reads the epoch once: one load.
#pragma once

#include <atomic>
#include <cstdint>

namespace svod {

namespace detail {
extern std::atomic<uint32_t> fault_handlers_epoch_value;  // starts at 1
}  // namespace detail

inline uint32_t fault_handlers_epoch() noexcept {
  return detail::fault_handlers_epoch_value.load(std::memory_order_acquire);
}

// Another signal handler for SIGSEGV, SIGBUS, SIGFPE or SIGILL may have been
// installed since svod's: launches check again.
void note_fault_handlers_changed() noexcept;

}  // namespace svod
