#include "svod/guard/op_deadline.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "svod/base/env.h"
#include "svod/base/error.h"

namespace svod {

// One per thread that ever ran a watched op; never freed (threads are few
// and the watchdog reads them without a lock).
struct Slot {
  std::atomic<int64_t> started_ns{0};  // 0: no op running
  std::atomic<const RunningOp*> op{nullptr};
  std::atomic<const char*> kind{nullptr};
  std::atomic<const char*> name{nullptr};
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

[[noreturn]] void time_out(const Slot& s, double seconds, int64_t ran_ns) {
  std::string text = "\nsvod: ";
  if (const RunningOp* op = s.op.load(); op != nullptr) {
    text += fmt::format("plan op {}", op->index);
    if (const std::string& label = op->label(op->plan, op->index); !label.empty()) text += " (" + label + ")";
    text += ", ";
  }
  text += s.kind.load();
  if (const char* name = s.name.load(); name != nullptr) text += fmt::format(" \"{}\"", name);
  text += fmt::format(" has run for {:.1f} s, past SVOD_OP_TIMEOUT={:g}; a running kernel cannot be stopped, so "
                      "the process ends with status {}\n",
                      static_cast<double>(ran_ns) * 1e-9, seconds, kOpTimeoutStatus);
  (void)!::write(STDERR_FILENO, text.data(), text.size());
  std::_Exit(kOpTimeoutStatus);
}

// Looks at every slot a few times per timeout (at most every 100 ms) for
// the life of the process.
void start_watchdog(double seconds) {
  static const bool started = [seconds] {
    std::thread([seconds] {
      const auto limit_ns = static_cast<int64_t>(seconds * 1e9);
      const auto period = std::chrono::nanoseconds(std::clamp<int64_t>(limit_ns / 4, 1'000'000, 100'000'000));
      for (;;) {
        std::this_thread::sleep_for(period);
        const int64_t now = now_ns();
        for (Slot* s = slots.load(); s != nullptr; s = s->next) {
          const int64_t started_ns = s->started_ns.load();
          if (started_ns != 0 && now - started_ns > limit_ns) time_out(*s, seconds, now - started_ns);
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
  if (s->started_ns.load(std::memory_order_relaxed) != 0) return;  // the enclosing op's deadline holds
  start_watchdog(op_timeout_seconds());
  s->op.store(op, std::memory_order_relaxed);
  s->kind.store(kind, std::memory_order_relaxed);
  s->name.store(name, std::memory_order_relaxed);
  s->started_ns.store(now_ns(), std::memory_order_release);
  slot_ = s;
}

OpDeadline::~OpDeadline() {
  if (slot_ != nullptr) slot_->started_ns.store(0, std::memory_order_release);
}

}  // namespace svod
