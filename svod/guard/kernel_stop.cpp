#include "svod/guard/kernel_stop.h"

#include <pthread.h>
#include <semaphore.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "svod/guard/fault_handlers.h"

namespace svod {

SVOD_HOT_THREAD_LOCAL const StopScope* stop_scope = nullptr;

namespace {

// How often the threads are signalled while a request is pending: a kernel
// found outside its own code at one signal is usually back in it by the next.
constexpr auto kSignalPeriod = std::chrono::milliseconds(5);

// Requests made and not withdrawn. Apart from the Stopper, so that a request
// made before any thread ran a kernel counts when one does.
std::atomic<int> pending{0};

// The threads that run kernels and the thread that signals them while
// requests are pending. The signalling thread is started with the first
// thread registered, before any of its kernels runs, so a request never
// makes a thread, takes a lock or allocates: the thread that needs a stop
// may be the one its kernel blocks (a kernel spinning in a callback the C
// library calls with its loader lock held, a deadline's watchdog thread).
// A request only counts itself and posts `wake`. Never destroyed: a thread
// may end (and leave the list) after static destructors ran.
struct Stopper {
  std::mutex mutex;  // guards threads and running
  std::vector<pthread_t> threads;
  bool running = false;  // the signalling thread exists (in a forked child: not until a launch starts one)
  sem_t wake;            // posted by every request

  Stopper() { sem_init(&wake, 0, 0); }

  // Starts the signalling thread unless it runs; with `mutex` held.
  void start_signalling() {
    if (running) return;
    try {
      std::thread thread([this] { signal_loop(); });
      pthread_setname_np(thread.native_handle(), "svod-stop");  // (for top, gdb and the tests)
      thread.detach();
      running = true;
    } catch (const std::system_error&) {
      // No thread to be had (a process at its limit): nothing is stopped;
      // the next launch on a new thread tries again.
    }
  }

  void signal_loop() {
    for (;;) {
      if (pending.load(std::memory_order_acquire) == 0) {
        sem_wait(&wake);  // (EINTR: looks again)
        continue;
      }
      {
        // Held while signalling: a registered thread leaves the list, under
        // this lock, before it ends, so every pthread_t here is alive.
        std::lock_guard lock(mutex);
        for (pthread_t t : threads) pthread_kill(t, kKernelStopSignal);
      }
      // A new request ends the wait: it is signalled at once.
      timespec until{};
      clock_gettime(CLOCK_MONOTONIC, &until);
      until.tv_nsec += std::chrono::nanoseconds(kSignalPeriod).count();
      if (until.tv_nsec >= 1'000'000'000) {
        until.tv_nsec -= 1'000'000'000;
        ++until.tv_sec;
      }
      sem_clockwait(&wake, CLOCK_MONOTONIC, &until);
    }
  }
};

std::atomic<Stopper*> made{nullptr};

Stopper& stopper() {
  static Stopper* const s = [] {
    auto* created = new Stopper();
    // A forked child has the forking thread alone, and no signalling thread:
    // the fault handlers' epoch makes each thread's next launch register
    // again (prepare_thread_for_kernels), which starts one.
    pthread_atfork([] { stopper().mutex.lock(); }, [] { stopper().mutex.unlock(); },
                   [] {
                     Stopper& c = stopper();
                     const pthread_t self = pthread_self();
                     const bool had_self = std::find_if(c.threads.begin(), c.threads.end(), [&](pthread_t t) {
                                             return pthread_equal(t, self);
                                           }) != c.threads.end();
                     c.threads.clear();
                     if (had_self) c.threads.push_back(self);
                     pending.store(0);
                     c.running = false;
                     sem_init(&c.wake, 0, 0);
                     c.mutex.unlock();
                     note_fault_handlers_changed();
                   });
    made.store(created, std::memory_order_release);
    return created;
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
  Stopper& s = stopper();
  std::lock_guard lock(s.mutex);
  if (!registration.registered) {
    s.threads.push_back(pthread_self());
    registration.registered = true;
  }
  s.start_signalling();
}

void StopScope::request(ErrorKind kind, std::string reason) noexcept {
  int expected = 0;
  if (!state_.compare_exchange_strong(expected, 1)) return;  // asked already
  kind_ = kind;
  reason_ = std::move(reason);
  state_.store(2, std::memory_order_release);
  pending.fetch_add(1, std::memory_order_acq_rel);
  if (Stopper* s = made.load(std::memory_order_acquire)) sem_post(&s->wake);
}

void StopScope::withdraw() noexcept {
  int state = state_.load();
  while (state == 1) {  // a request being made: let it finish
    std::this_thread::yield();
    state = state_.load();
  }
  if (state != 2 || state_.exchange(0) != 2) return;
  // (A request made before a fork is not the child's: its count was reset.)
  int count = pending.load();
  while (count > 0 && !pending.compare_exchange_weak(count, count - 1)) {
  }
}

const StopScope* StopScope::requested_around() const noexcept {
  for (const StopScope* s = this; s != nullptr; s = s->parent_)
    if (s->state_.load(std::memory_order_acquire) == 2) return s;
  return nullptr;
}

}  // namespace svod
