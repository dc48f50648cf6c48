// Stopping CPU kernels from another thread: a kernel that runs past its
// deadline (SVOD_OP_TIMEOUT, svod run --timeout) or whose work nobody waits
// for any more (its local rank's group failed) is stopped where it runs and
// its launch fails with an Error, while the process goes on.
//
// Kernels run under the StopScope their launch was made in: the innermost
// one entered on the launching thread, handed on to the core_id slices on
// the pool's threads and to the ops a plan runs on other threads
// (RunningOp::stop; launch_stop_scope() says which one a launch gets). Scopes
// nest (a plan op's deadline inside a rank's scope), and a kernel stops when
// any scope around it is asked to. StopScope::request marks the scope and
// has a background thread send kKernelStopSignal to every thread that has
// run kernels, every few milliseconds, until the request is withdrawn (that
// thread, "svod-stop", is started with the first thread that runs kernels,
// so a request makes no thread, takes no lock and allocates nothing); the
// CPU backend's handler (backends/cpu/kernel_fault.h) stops a kernel of a
// requested scope when the signal finds the thread in the kernel's own code,
// as it stops a fault there. A thread found elsewhere (svod's code, a libc
// function the kernel called, a system call) goes on and is asked again at
// the next signal, so a kernel blocked in a system call is never stopped:
// its requester decides what then (the deadlines end the process).
#pragma once

#include <signal.h>

#include <atomic>
#include <string>

#include "svod/base/error.h"
#include "svod/guard/running_op.h"

namespace svod {

// SIGURG: ignored by default, so a stray one is harmless, and not used by
// Python, MPI or oneTBB. The handler passes on the ones svod did not send.
inline constexpr int kKernelStopSignal = SIGURG;

class StopScope {
 public:
  StopScope() = default;
  ~StopScope() { withdraw(); }
  StopScope(const StopScope&) = delete;
  StopScope& operator=(const StopScope&) = delete;

  // Asks every kernel running or launched under this scope to stop, until
  // withdraw(); the launches fail with Error(kind) saying `reason` ("it ran
  // past SVOD_OP_TIMEOUT=1 s"). Only the first request counts. Any thread;
  // takes no lock and allocates nothing (the reason is the caller's).
  // Without a thread to send the signals (a process that was at its thread
  // limit when its kernels' threads registered), nothing is stopped.
  void request(ErrorKind kind, std::string reason) noexcept;
  // Ends a request; called by the scope's owner once nothing under it runs.
  void withdraw() noexcept;
  // Whether this scope or one around it was asked to stop: read by the
  // signal handler (no locks, no allocation).
  const StopScope* requested_around() const noexcept;

  ErrorKind kind() const noexcept { return kind_; }  // valid once requested
  const std::string& reason() const noexcept { return reason_; }
  const StopScope* parent() const noexcept { return parent_; }

 private:
  friend class EnterStopScope;
  const StopScope* parent_ = nullptr;  // set when entered
  std::atomic<int> state_{0};          // 0: not requested, 1: being requested, 2: requested
  ErrorKind kind_ = ErrorKind::Execution;
  std::string reason_;
};

// Makes `scope` the calling thread's stop scope for its lifetime, inside
// `parent` (by default the scope a launch here would run in: give the
// launching thread's when the work was handed over from another thread).
class EnterStopScope {
 public:
  explicit EnterStopScope(StopScope& scope) noexcept : EnterStopScope(scope, launch_stop_scope()) {}
  EnterStopScope(StopScope& scope, const StopScope* parent) noexcept : previous_(stop_scope) {
    scope.parent_ = parent;
    stop_scope = &scope;
  }
  ~EnterStopScope() { stop_scope = previous_; }
  EnterStopScope(const EnterStopScope&) = delete;
  EnterStopScope& operator=(const EnterStopScope&) = delete;

 private:
  const StopScope* previous_;
};

// Makes the calling thread one that StopScope::request signals (threads that
// run kernels: the CPU backend calls it before a thread's first launch, and
// again after a fork), and starts the signalling thread unless it runs; the
// calling thread is left out again when it ends.
void register_kernel_thread();

}  // namespace svod
