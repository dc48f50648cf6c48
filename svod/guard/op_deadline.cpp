#include "svod/guard/op_deadline.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>

#include "svod/base/env.h"
#include "svod/base/error.h"

namespace svod {
namespace {

// The thread's op under a deadline now, if any: ops inside it (a plan op's
// kernel) are covered by it.
thread_local const OpDeadline* current_deadline = nullptr;

// How long a stop may take before the process ends instead.
constexpr std::chrono::seconds kStopGrace{1};

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
  if (current_deadline != nullptr) return;  // the enclosing op's deadline holds
  const double seconds = op_timeout_seconds();
  op_ = op;
  kind_ = kind;
  name_ = name;
  started_ = std::chrono::steady_clock::now();
  scope_.emplace();
  enter_.emplace(*scope_, launch_stop_scope());
  static const std::string reason = fmt::format("it ran past SVOD_OP_TIMEOUT={:g} s", seconds);
  deadline_.emplace(nanoseconds_of(seconds),
                    DeadlineAction{.stop = &*scope_,
                                   .kind = ErrorKind::Timeout,
                                   .reason = reason,
                                   .report = [this, seconds] { return report(seconds); },
                                   .grace = kStopGrace,
                                   .status = kOpTimeoutStatus});
  current_deadline = this;
}

OpDeadline::~OpDeadline() {
  if (!deadline_) return;
  deadline_.reset();
  enter_.reset();
  current_deadline = nullptr;
}

const StopScope* OpDeadline::scope() const noexcept { return scope_ ? &*scope_ : nullptr; }

// "plan op 2 (layer3), kernel "k" has run for 2.0 s, past ...".
std::string OpDeadline::report(double seconds) const {
  std::string op;
  if (op_ != nullptr) {
    op = fmt::format("plan op {}", op_->index);
    if (const std::string& label = op_->label(op_->plan, op_->index); !label.empty()) op += " (" + label + ")";
    op += ", ";
  }
  op += kind_;
  if (name_ != nullptr) op += fmt::format(" \"{}\"", name_);
  const double ran = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  return fmt::format(
      "\nsvod: {} has run for {:.1f} s, past SVOD_OP_TIMEOUT={:g}, and could not be stopped (only a CPU kernel in "
      "its own code can be: this op is in a system call, a library function, a copy, a host function or a device); "
      "the process ends with status {}\n",
      op, ran, seconds, kOpTimeoutStatus);
}

}  // namespace svod
