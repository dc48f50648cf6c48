#include "svod/guard/watchdog.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <system_error>
#include <thread>

namespace svod {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// The armed deadlines, in no order (a process has a few: one per thread in
// an op under SVOD_OP_TIMEOUT, one per timed call or run), and the thread
// that watches them. Never destroyed: its thread outlives main().
struct Watchdog {
  std::mutex mutex;
  std::condition_variable wake;
  Deadline* first = nullptr;
  int64_t sleeping_until = kNever;  // when the thread wakes next on its own
  bool started = false;

  static Watchdog& get() {
    static Watchdog* const watchdog = new Watchdog();
    return *watchdog;
  }

  // Called with `mutex` held.
  void link(Deadline& d) {
    d.next_ = first;
    if (first != nullptr) first->prev_ = &d;
    first = &d;
    d.armed_ = true;
    if (!started) {
      // Without a thread (a process at its thread limit) nothing is watched.
      try {
        std::thread([this] { watch(); }).detach();
        started = true;
      } catch (const std::system_error&) {
      }
    } else if (d.due_ns_ < sleeping_until) {
      wake.notify_one();
    }
  }
  void unlink(Deadline& d) noexcept {
    (d.prev_ != nullptr ? d.prev_->next_ : first) = d.next_;
    if (d.next_ != nullptr) d.next_->prev_ = d.prev_;
    d.prev_ = d.next_ = nullptr;
    d.armed_ = false;
  }

  // Acts on the deadlines that passed and returns when to look again. A
  // deadline removed meanwhile only makes the thread wake early once.
  int64_t look(int64_t now) {
    int64_t next = kNever;
    for (Deadline* d = first; d != nullptr; d = d->next_) {
      const DeadlineAction& a = d->action_;
      int64_t asked = d->stop_asked_ns_.load(std::memory_order_relaxed);
      if (asked == 0 && now >= d->due_ns_) {
        asked = now;
        d->stop_asked_ns_.store(now, std::memory_order_relaxed);
        if (a.stop != nullptr) {
          try {
            a.stop->request(a.kind, std::string(a.reason));
          } catch (...) {  // no memory for the reason: the end, if any, still comes
          }
        }
      }
      if (asked == 0) {
        next = std::min(next, d->due_ns_);
      } else if (a.report) {
        const int64_t end = asked + a.grace.count();
        if (now >= end) finish(*d);
        next = std::min(next, end);
      }
    }
    return next;
  }

  [[noreturn]] static void finish(const Deadline& d) {
    std::string text;
    try {
      text = d.action_.report();
    } catch (...) {
      text = "svod: a deadline passed and what it guards could not be stopped\n";
    }
    std::fflush(nullptr);
    (void)!::write(STDERR_FILENO, text.data(), text.size());
    std::_Exit(d.action_.status);
  }

  void watch() {
    std::unique_lock lock(mutex);
    for (;;) {
      sleeping_until = look(now_ns());
      if (sleeping_until == kNever)
        wake.wait(lock);
      else
        wake.wait_until(lock, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(sleeping_until)));
    }
  }
};

Deadline::Deadline(std::chrono::nanoseconds after, DeadlineAction action) : action_(std::move(action)) {
  const int64_t now = now_ns();
  due_ns_ = now + std::clamp<int64_t>(after.count(), 0, kNever - now);
  Watchdog& w = Watchdog::get();
  const std::lock_guard lock(w.mutex);
  w.link(*this);
}

void Deadline::disarm() noexcept {
  Watchdog& w = Watchdog::get();
  const std::lock_guard lock(w.mutex);
  if (armed_) w.unlink(*this);
}

bool Deadline::passed() const noexcept { return stop_asked_ns_.load(std::memory_order_relaxed) != 0; }

TimeLimit::TimeLimit(std::chrono::nanoseconds limit, std::string_view what)
    : reason_(fmt::format("{} ran past its time limit of {:g} s", what, static_cast<double>(limit.count()) * 1e-9)),
      enter_(scope_),
      deadline_(limit, DeadlineAction{.stop = &scope_, .reason = reason_, .report = nullptr}) {}  // no end

}  // namespace svod
