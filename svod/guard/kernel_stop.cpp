#include "svod/guard/kernel_stop.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace svod {

SVOD_HOT_THREAD_LOCAL const StopScope* stop_scope = nullptr;

namespace {

// How often the threads are signalled while a request is pending: a kernel
// found outside its own code at one signal is usually back in it by the next.
constexpr auto kSignalPeriod = std::chrono::milliseconds(5);

// The threads that run kernels and the requests pending, and the thread that
// signals the former while there are any of the latter. Never destroyed: a
// thread may end (and leave the list) after static destructors ran.
struct Stopper {
  std::mutex mutex;
  std::condition_variable requested;
  std::vector<pthread_t> threads;
  int pending = 0;
  uint64_t requests = 0;  // made so far: a new one is signalled at once
  bool running = false;   // the signalling thread exists (not in a forked child)

  void signal_loop() {
    std::unique_lock lock(mutex);
    for (;;) {
      requested.wait(lock, [&] { return pending > 0; });
      const uint64_t seen = requests;
      // Held while signalling: a registered thread leaves the list, under
      // this lock, before it ends, so every pthread_t here is alive.
      for (pthread_t t : threads) pthread_kill(t, kKernelStopSignal);
      requested.wait_for(lock, kSignalPeriod, [&] { return requests != seen; });
    }
  }
};

Stopper& stopper() {
  static Stopper* const s = [] {
    auto* made = new Stopper();
    // A forked child has the forking thread alone, and no signalling thread.
    pthread_atfork([] { stopper().mutex.lock(); }, [] { stopper().mutex.unlock(); },
                   [] {
                     Stopper& c = stopper();
                     const pthread_t self = pthread_self();
                     const bool had_self = std::find_if(c.threads.begin(), c.threads.end(), [&](pthread_t t) {
                                             return pthread_equal(t, self);
                                           }) != c.threads.end();
                     c.threads.clear();
                     if (had_self) c.threads.push_back(self);
                     c.pending = 0;
                     c.running = false;
                     c.mutex.unlock();
                   });
    return made;
  }();
  return *s;
}

// Leaves the list when the thread ends.
struct Registration {
  bool registered = false;
  ~Registration() {
    if (!registered) return;
    Stopper& s = stopper();
    std::lock_guard lock(s.mutex);
    const pthread_t self = pthread_self();
    std::erase_if(s.threads, [&](pthread_t t) { return pthread_equal(t, self); });
  }
};

}  // namespace

void register_kernel_thread() {
  thread_local Registration registration;
  if (registration.registered) return;
  Stopper& s = stopper();
  std::lock_guard lock(s.mutex);
  s.threads.push_back(pthread_self());
  registration.registered = true;
}

void StopScope::request(ErrorKind kind, std::string reason) {
  int expected = 0;
  if (!state_.compare_exchange_strong(expected, 1)) return;  // asked already
  kind_ = kind;
  reason_ = std::move(reason);
  state_.store(2, std::memory_order_release);
  Stopper& s = stopper();
  {
    std::lock_guard lock(s.mutex);
    ++s.pending;
    ++s.requests;
    if (!s.running) {
      try {
        std::thread([&s] { s.signal_loop(); }).detach();
        s.running = true;
      } catch (const std::system_error&) {
        // No thread to be had (a process at its limit): nothing is stopped
        // now; the next request tries again.
      }
    }
  }
  s.requested.notify_all();
}

void StopScope::withdraw() noexcept {
  int state = state_.load();
  while (state == 1) {  // a request being made: let it finish
    std::this_thread::yield();
    state = state_.load();
  }
  if (state != 2 || state_.exchange(0) != 2) return;
  Stopper& s = stopper();
  std::lock_guard lock(s.mutex);
  s.pending = std::max(s.pending - 1, 0);  // (a request made before a fork is not the child's)
}

const StopScope* StopScope::requested_around() const noexcept {
  for (const StopScope* s = this; s != nullptr; s = s->parent_)
    if (s->state_.load(std::memory_order_acquire) == 2) return s;
  return nullptr;
}

}  // namespace svod
