// The process's one watchdog: every deadline svod keeps is a Deadline here —
// SVOD_OP_TIMEOUT's per op (op_deadline.h), a timed call (TimeLimit below:
// Python's svod.time_limit, tinygrad's per-candidate timeout), `svod run
// --timeout`'s run and the stuck-rank watch of local ranks. One thread,
// started with the first deadline, sleeps until the earliest one armed.
//
// A deadline that passes asks its stop scope (kernel_stop.h), if it has one,
// to stop the kernels under it: they fail with Error(kind) saying `reason`.
// A deadline with an end then waits `grace` more; if it is still armed then
// (what it guards could not be stopped: a kernel in a system call or a
// library function, a copy, a device), its report goes to stderr and the
// process ends with its status, so the caller sees a clear end instead of a
// hang. Deadlines without an end leave such work to run to its end. The
// child of a fork keeps no deadline of its parent: every one is disarmed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "svod/base/error.h"
#include "svod/guard/kernel_stop.h"

namespace svod {

struct DeadlineAction {
  StopScope* stop = nullptr;  // asked to stop when the deadline passes; may be null
  ErrorKind kind = ErrorKind::Timeout;
  std::string_view reason;  // the stopped launches' message ("it ran past ..."); outlives the deadline
  // The end: when set, called on the watchdog's thread `grace` after the
  // stop request if the deadline is still armed, with the time since it was
  // armed; it returns what stderr is told, and the process ends with
  // `status`. It runs with the watchdog's lock and the deadline's held (so
  // what it reads stays alive): it must not wait for a lock that a thread
  // holds while it makes, arms, disarms or ends a deadline.
  std::function<std::string(std::chrono::nanoseconds armed_for)> report;
  std::chrono::nanoseconds grace{0};
  int status = 0;
};

// `seconds` (finite, at most about 292 years) as nanoseconds, for deadlines.
inline std::chrono::nanoseconds nanoseconds_of(double seconds) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(seconds));
}

// A deadline of the watchdog, watched from construction to destruction
// (neither copied nor moved: the watchdog holds its address) and armed from
// construction with a time, or by arm(), until disarm() or destruction. A
// deadline can be armed again and again (one per thread serves every op the
// thread runs): arming and disarming take only the deadline's own lock, and
// wake the watchdog's thread only when the new time is earlier than the one
// it sleeps until; constructing and destroying take the watchdog's lock.
class Deadline {
 public:
  explicit Deadline(DeadlineAction action);  // not armed
  Deadline(std::chrono::nanoseconds after, DeadlineAction action);
  ~Deadline();
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

  // Arms the deadline `after` from now (again: a new time, not passed).
  void arm(std::chrono::nanoseconds after);
  // Withdraws the deadline: nothing it asks happens after this returns.
  // The stop request it made, if any, stays (its scope's owner withdraws it).
  void disarm() noexcept;
  // Whether the deadline passed since it was last armed (and asked its
  // scope to stop).
  bool passed() const noexcept;

 private:
  friend struct Watchdog;
  std::mutex mutex_;  // over the times below, and the action while it runs
  int64_t armed_ns_ = 0;
  int64_t due_ns_;    // kNotArmed when not armed
  int64_t stop_asked_ns_ = 0;  // 0: not passed since armed
  std::atomic<bool> passed_{false};
  const DeadlineAction action_;
  Deadline* prev_ = nullptr;  // the watchdog's list, under its lock
  Deadline* next_ = nullptr;
};

// Runs the calling thread's kernel launches (and plans) in its own stop
// scope under a deadline `limit` from now: kernels still running then are
// stopped and their launch fails with Error(Timeout) saying `what` ran past
// `limit`. Nothing ends the process: what cannot be stopped runs to its end.
// Scoped to the thread: construct and destroy it on one thread, nested
// properly with other stop scopes.
class TimeLimit {
 public:
  TimeLimit(std::chrono::nanoseconds limit, std::string_view what);
  TimeLimit(const TimeLimit&) = delete;
  TimeLimit& operator=(const TimeLimit&) = delete;
  bool passed() const noexcept { return deadline_.passed(); }
  const StopScope& scope() const noexcept { return scope_; }

 private:
  std::string reason_;
  StopScope scope_;
  EnterStopScope enter_;
  Deadline deadline_;
};

}  // namespace svod
