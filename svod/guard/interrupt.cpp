#include "svod/guard/interrupt.h"

#include <signal.h>

#include <atomic>
#include <mutex>

namespace svod {
namespace {

std::atomic<StopScope*> interruptible{nullptr};
// Handlers between reading `interruptible` and being done with its scope: a
// scope that ends waits for them (a SIGINT taken on another thread).
std::atomic<int> handlers_reading{0};
struct sigaction before{};

void on_interrupt(int signal, siginfo_t* info, void* context) {
  handlers_reading.fetch_add(1, std::memory_order_acq_rel);
  if (StopScope* scope = interruptible.load(std::memory_order_acquire))
    scope->request(ErrorKind::Execution, "interrupted");  // short enough to need no allocation
  handlers_reading.fetch_sub(1, std::memory_order_acq_rel);
  if ((before.sa_flags & SA_SIGINFO) != 0) {
    before.sa_sigaction(signal, info, context);
  } else if (before.sa_handler == SIG_DFL) {
    ::sigaction(signal, &before, nullptr);
    ::raise(signal);
  } else if (before.sa_handler != SIG_IGN) {
    before.sa_handler(signal);
  }
}

}  // namespace

void install_interrupt_stop() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction ours{};
    ours.sa_sigaction = on_interrupt;
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&ours.sa_mask);
    ::sigaction(SIGINT, &ours, &before);
  });
}

InterruptScope::InterruptScope() noexcept {
  // A load and a store, not a compare-and-swap (the call's cost counts):
  // two threads that both find none are both taken, the later one winning,
  // and each ends only its own.
  if (interruptible.load(std::memory_order_relaxed) == nullptr) {
    interruptible.store(&scope_, std::memory_order_release);
    active_ = true;
  }
}

InterruptScope::~InterruptScope() {
  if (!active_) return;
  if (interruptible.load(std::memory_order_relaxed) == &scope_) interruptible.store(nullptr, std::memory_order_release);
  while (handlers_reading.load(std::memory_order_acquire) != 0) {
  }
}

}  // namespace svod
