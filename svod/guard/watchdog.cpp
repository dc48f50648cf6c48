#include "svod/guard/watchdog.h"

#include <fmt/format.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <limits>
#include <new>
#include <system_error>
#include <thread>

namespace svod {
namespace {

constexpr int64_t kNotArmed = std::numeric_limits<int64_t>::max();
// What Watchdog::sleeping_until holds while the thread looks at the
// deadlines, and once a deadline was armed meanwhile.
constexpr int64_t kLooking = std::numeric_limits<int64_t>::min();
constexpr int64_t kLookAgain = kLooking + 1;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// Every deadline, armed or not (a process has a few: one per thread that ran
// an op under SVOD_OP_TIMEOUT, one per timed block or run), and the thread
// that watches them. Never destroyed: its thread outlives main().
//
// The thread holds `mutex` while it looks (each deadline under its own lock)
// and while it is not waiting, so a wake-up asked for with `mutex` held is
// never lost. Arming publishes the new time under the deadline's lock, then
// reads `sleeping_until`: while the thread looks it marks the look stale
// (kLookAgain) and the thread looks again; when the thread sleeps past the
// new time it wakes it under `mutex`; otherwise the thread's own wake-up
// comes first and finds the new time.
struct Watchdog {
  std::mutex mutex;
  std::condition_variable wake;
  uint64_t wakes = 0;  // under mutex: wake-ups asked for
  Deadline* first = nullptr;
  std::atomic<int64_t> sleeping_until{kNotArmed};
  bool started = false;

  static Watchdog& get() {
    static Watchdog* const watchdog = [] {
      auto* w = new Watchdog();
      ::pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
      return w;
    }();
    return *watchdog;
  }

  // A fork copies only the forking thread: the child has no watchdog thread,
  // and deadlines of threads it does not have, whose locks they may hold. So
  // the fork waits until the thread is not looking, and the child starts
  // over: it keeps no deadline of its parent (every one disarmed, each lock
  // made anew), and the thread starts again at the next deadline armed.
  static void before_fork() noexcept { get().mutex.lock(); }
  static void after_fork_in_parent() noexcept { get().mutex.unlock(); }
  static void after_fork_in_child() noexcept {
    Watchdog& w = get();
    for (Deadline* d = w.first; d != nullptr; d = d->next_) {
      new (&d->mutex_) std::mutex();
      d->due_ns_ = kNotArmed;
    }
    new (&w.wake) std::condition_variable();
    w.started = false;
    w.sleeping_until.store(kNotArmed);
    w.mutex.unlock();
  }

  // Called with `mutex` held. Without a thread (a process at its thread
  // limit) nothing is watched.
  void start() {
    if (started) return;
    try {
      std::thread([this] { watch(); }).detach();
      started = true;
    } catch (const std::system_error&) {
    }
  }

  void attach(Deadline& d) {
    const std::lock_guard lock(mutex);
    d.next_ = first;
    if (first != nullptr) first->prev_ = &d;
    first = &d;
    start();
  }
  void detach(Deadline& d) noexcept {
    const std::lock_guard lock(mutex);
    (d.prev_ != nullptr ? d.prev_->next_ : first) = d.next_;
    if (d.next_ != nullptr) d.next_->prev_ = d.prev_;
  }

  // After a deadline was armed for `due`.
  void armed(int64_t due) {
    int64_t until = sleeping_until.load();
    while (until == kLooking) {
      if (sleeping_until.compare_exchange_weak(until, kLookAgain)) return;
    }
    if (until == kLookAgain || due >= until) return;
    const std::lock_guard lock(mutex);
    start();  // again in a forked child
    ++wakes;
    wake.notify_one();
  }

  // Acts on the deadlines that passed and returns when to look again.
  int64_t look(int64_t now) {
    int64_t next = kNotArmed;
    for (Deadline* d = first; d != nullptr; d = d->next_) {
      const std::lock_guard lock(d->mutex_);
      if (d->due_ns_ == kNotArmed) continue;
      const DeadlineAction& a = d->action_;
      if (d->stop_asked_ns_ == 0 && now >= d->due_ns_) {
        d->stop_asked_ns_ = now;
        if (a.stop != nullptr) {
          try {
            a.stop->request(a.kind, std::string(a.reason));
          } catch (...) {  // no memory for the reason: the end, if any, still comes
          }
        }
        // After the request: whoever sees passed() sees the scope asked to stop.
        d->passed_.store(true, std::memory_order_release);
      }
      if (d->stop_asked_ns_ == 0) {
        next = std::min(next, d->due_ns_);
      } else if (a.report) {
        const int64_t end = d->stop_asked_ns_ + a.grace.count();
        if (now >= end) finish(a, std::chrono::nanoseconds(now - d->armed_ns_));
        next = std::min(next, end);
      }
    }
    return next;
  }

  // With the deadline's lock held, so that what the report reads stays.
  [[noreturn]] static void finish(const DeadlineAction& a, std::chrono::nanoseconds armed_for) {
    std::string text;
    try {
      text = a.report(armed_for);
    } catch (...) {
      text = "svod: a deadline passed and what it guards could not be stopped\n";
    }
    std::fflush(nullptr);
    (void)!::write(STDERR_FILENO, text.data(), text.size());
    std::_Exit(a.status);
  }

  void watch() {
    std::unique_lock lock(mutex);
    for (;;) {
      sleeping_until.store(kLooking);
      const int64_t next = look(now_ns());
      int64_t looking = kLooking;
      if (!sleeping_until.compare_exchange_strong(looking, next)) continue;  // armed meanwhile
      const uint64_t seen = wakes;
      auto woken = [&] { return wakes != seen; };
      if (next == kNotArmed)
        wake.wait(lock, woken);
      else
        wake.wait_until(lock, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(next)), woken);
    }
  }
};

Deadline::Deadline(DeadlineAction action) : due_ns_(kNotArmed), action_(std::move(action)) {
  Watchdog::get().attach(*this);
}

Deadline::Deadline(std::chrono::nanoseconds after, DeadlineAction action) : Deadline(std::move(action)) {
  arm(after);
}

Deadline::~Deadline() {
  disarm();
  Watchdog::get().detach(*this);
}

void Deadline::arm(std::chrono::nanoseconds after) {
  const int64_t now = now_ns();
  const int64_t due = now + std::clamp<int64_t>(after.count(), 0, kNotArmed - 1 - now);
  {
    const std::lock_guard lock(mutex_);
    armed_ns_ = now;
    due_ns_ = due;
    stop_asked_ns_ = 0;
    passed_.store(false, std::memory_order_relaxed);
  }
  Watchdog::get().armed(due);
}

void Deadline::disarm() noexcept {
  const std::lock_guard lock(mutex_);
  due_ns_ = kNotArmed;
}

bool Deadline::passed() const noexcept { return passed_.load(std::memory_order_acquire); }

TimeLimit::TimeLimit(std::chrono::nanoseconds limit, std::string_view what)
    : reason_(fmt::format("{} ran past its time limit of {:g} s", what, static_cast<double>(limit.count()) * 1e-9)),
      enter_(scope_),
      deadline_(limit, DeadlineAction{.stop = &scope_, .reason = reason_, .report = nullptr}) {}  // no end

}  // namespace svod
