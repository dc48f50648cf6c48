#include "svod/guard/op_deadline.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "svod/base/env.h"
#include "svod/base/error.h"

namespace svod {

// One per thread that ever ran a watched op; never freed (threads are few
// and the watchdog walks the list without a lock). An op's start and end and
// the watchdog's look at it hold `mutex`, so that a stop is never asked of
// the op after the one that timed out.
struct Slot {
  std::mutex mutex;
  int64_t started_ns = 0;  // 0: no op running
  int64_t stop_asked_ns = 0;  // 0: not asked yet
  const RunningOp* op = nullptr;
  const char* kind = nullptr;
  const char* name = nullptr;
  StopScope scope;
  Slot* next = nullptr;
};

namespace {

std::atomic<Slot*> slots{nullptr};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Slot* thread_slot() {
  thread_local Slot* mine = [] {
    auto* s = new Slot();
    s->next = slots.load();
    while (!slots.compare_exchange_weak(s->next, s)) {
    }
    return s;
  }();
  return mine;
}

// "plan op 2 (layer3), kernel "k"".
std::string describe(const Slot& s) {
  std::string text;
  if (const RunningOp* op = s.op; op != nullptr) {
    text += fmt::format("plan op {}", op->index);
    if (const std::string& label = op->label(op->plan, op->index); !label.empty()) text += " (" + label + ")";
    text += ", ";
  }
  text += s.kind;
  if (s.name != nullptr) text += fmt::format(" \"{}\"", s.name);
  return text;
}

[[noreturn]] void time_out(const Slot& s, double seconds, int64_t ran_ns) {
  const std::string text = fmt::format(
      "\nsvod: {} has run for {:.1f} s, past SVOD_OP_TIMEOUT={:g}, and could not be stopped (only a CPU kernel in "
      "its own code can be: this op is in a system call, a library function, a copy, a host function or a device); "
      "the process ends with status {}\n",
      describe(s), static_cast<double>(ran_ns) * 1e-9, seconds, kOpTimeoutStatus);
  (void)!::write(STDERR_FILENO, text.data(), text.size());
  std::_Exit(kOpTimeoutStatus);
}

// How long a stop may take before the process ends instead.
constexpr int64_t kStopGraceNs = 1'000'000'000;

// Looks at every slot a few times per timeout (at most every 100 ms) for
// the life of the process: an op past its deadline is asked to stop, and
// ends the process when it is still running kStopGraceNs later.
void start_watchdog(double seconds) {
  static const bool started = [seconds] {
    std::thread([seconds] {
      const auto limit_ns = static_cast<int64_t>(seconds * 1e9);
      const auto period = std::chrono::nanoseconds(std::clamp<int64_t>(limit_ns / 4, 1'000'000, 100'000'000));
      for (;;) {
        std::this_thread::sleep_for(period);
        const int64_t now = now_ns();
        for (Slot* s = slots.load(); s != nullptr; s = s->next) {
          std::lock_guard lock(s->mutex);
          if (s->started_ns == 0 || now - s->started_ns <= limit_ns) continue;
          if (s->stop_asked_ns == 0) {
            s->stop_asked_ns = now;
            s->scope.request(ErrorKind::Timeout, fmt::format("it ran past SVOD_OP_TIMEOUT={:g} s", seconds));
          } else if (now - s->stop_asked_ns > kStopGraceNs) {
            time_out(*s, seconds, now - s->started_ns);
          }
        }
      }
    }).detach();
    return true;
  }();
  (void)started;
}

}  // namespace

double op_timeout_seconds() {
  // Read once; a bad value is thrown at every call rather than out of the
  // initializer, which threads loading programs at once may all be waiting on.
  struct Timeout {
    double seconds = 0;
    std::optional<Error> error;
  };
  static const Timeout timeout = [] {
    Timeout t;
    const auto text = env_string("SVOD_OP_TIMEOUT");
    if (!text) return t;
    char* end = nullptr;
    t.seconds = std::strtod(text->c_str(), &end);
    if (end != text->c_str() + text->size() || !(t.seconds > 0) || t.seconds > 1e9)
      t.error =
          make_error(ErrorKind::Validation, "SVOD_OP_TIMEOUT=\"{}\": expected a positive number of seconds", *text);
    return t;
  }();
  if (timeout.error) throw *timeout.error;
  return timeout.seconds;
}

OpDeadline::OpDeadline(const RunningOp* op, const char* kind, const char* name) {
  Slot* s = thread_slot();
  std::lock_guard lock(s->mutex);
  if (s->started_ns != 0) return;  // the enclosing op's deadline holds
  start_watchdog(op_timeout_seconds());
  s->op = op;
  s->kind = kind;
  s->name = name;
  s->stop_asked_ns = 0;
  s->started_ns = now_ns();
  slot_ = s;
  scope_.emplace(s->scope, launch_stop_scope());
}

const StopScope* OpDeadline::scope() const noexcept { return slot_ != nullptr ? &slot_->scope : nullptr; }

OpDeadline::~OpDeadline() {
  if (slot_ == nullptr) return;
  scope_.reset();
  std::lock_guard lock(slot_->mutex);
  slot_->started_ns = 0;
  slot_->scope.withdraw();
}

}  // namespace svod
