#include "svod/guard/signal_stack.h"

#include <signal.h>
#include <sys/mman.h>

#include <cstddef>

namespace svod {

namespace {

constexpr size_t kStackBytes = 64 * 1024;

// Unmaps this thread's alternate stack when the thread ends.
struct SignalStack {
  void* memory = nullptr;
  ~SignalStack() {
    if (memory == nullptr) return;
    stack_t off{};
    off.ss_flags = SS_DISABLE;
    sigaltstack(&off, nullptr);
    munmap(memory, kStackBytes);
  }
};
thread_local SignalStack signal_stack;

}  // namespace

void ensure_signal_stack() noexcept {
  stack_t current{};
  if (sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE)) return;  // the thread has one
  void* memory = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return;
  stack_t stack{};
  stack.ss_sp = memory;
  stack.ss_size = kStackBytes;
  if (sigaltstack(&stack, nullptr) != 0) {
    munmap(memory, kStackBytes);
    return;
  }
  signal_stack.memory = memory;
}

}  // namespace svod
