#include "svod/guard/op_deadline.h"

#include <fmt/format.h>

#include <chrono>
#include <optional>
#include <string>

#include "svod/base/env.h"
#include "svod/base/error.h"

namespace svod {
namespace {

// How long a stop may take before the process ends instead.
constexpr std::chrono::seconds kStopGrace{1};

}  // namespace

// A thread's deadline for its ops, armed while one runs (the first on the
// thread to start: ops inside it, a plan op's kernel, are covered by it),
// with the stop scope the op runs in and what its report names.
struct OpSlot {
  explicit OpSlot(double seconds)
      : seconds(seconds),
        reason(fmt::format("it ran past SVOD_OP_TIMEOUT={:g} s", seconds)),
        deadline(DeadlineAction{.stop = &scope,
                                .kind = ErrorKind::Timeout,
                                .reason = reason,
                                .report = [this](std::chrono::nanoseconds ran) { return report(ran); },
                                .grace = kStopGrace,
                                .status = kOpTimeoutStatus}) {}

  // "op 2 (layer3) kernel k has run for 2.0 s, past ...".
  std::string report(std::chrono::nanoseconds ran) const {
    return fmt::format(
        "\nsvod: {} has run for {:.1f} s, past SVOD_OP_TIMEOUT={:g}, and could not be stopped (only a CPU kernel "
        "in its own code can be: this op is in a system call, a library function, a copy, a host function or a "
        "device); the process ends with status {}\n",
        title, std::chrono::duration<double>(ran).count(), seconds, kOpTimeoutStatus);
  }

  const double seconds;
  const std::string reason;
  // The op running under the deadline (set before it is armed).
  bool running = false;
  std::string title;
  StopScope scope;
  Deadline deadline;
};

double op_timeout_seconds() {
  // Read once; a bad value is thrown at every call rather than out of the
  // initializer, which threads loading programs at once may all be waiting on.
  struct Timeout {
    double seconds = 0;
    std::optional<Error> error;
  };
  static const Timeout timeout = [] {
    Timeout t;
    try {
      t.seconds = env_seconds(EnvVar::OpTimeout).value_or(0);
    } catch (const Error& e) {
      t.error = e;
    }
    return t;
  }();
  if (timeout.error) throw *timeout.error;
  return timeout.seconds;
}

OpDeadline::OpDeadline(std::string title) {
  thread_local OpSlot slot(op_timeout_seconds());
  if (slot.running) return;  // the enclosing op's deadline holds
  slot.running = true;
  slot.title = std::move(title);
  slot_ = &slot;
  enter_.emplace(slot.scope, launch_stop_scope());
  slot.deadline.arm(nanoseconds_of(slot.seconds));
}

OpDeadline::~OpDeadline() {
  if (slot_ == nullptr) return;
  slot_->deadline.disarm();
  enter_.reset();
  slot_->scope.withdraw();
  slot_->running = false;
}

const StopScope* OpDeadline::scope() const noexcept { return slot_ != nullptr ? &slot_->scope : nullptr; }

}  // namespace svod
