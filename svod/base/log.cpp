#include "svod/base/log.h"

#include <pthread.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#ifdef __GLIBCXX__
#include <cxxabi.h>
#endif

#include "svod/base/env.h"
#include "svod/base/error.h"
#include "svod/base/log_sink.h"

namespace svod {

namespace {

std::atomic<size_t> warnings{0};

// The installed sink (log_sink.h) and how many threads are in a call of it.
struct Installed {
  explicit Installed(LogSink s) : sink(std::move(s)) {}
  LogSink sink;
  long calls = 0;  // guarded by the lock below; <= 0 once no thread is in a call
};

// A spin lock, held only to read or swap `current` and count calls (never
// while a sink runs): unlike a mutex it can simply be cleared in the child of
// a fork.
std::atomic<bool> locked{false};
// Never destroyed: threads may still log while the process exits.
std::shared_ptr<Installed>& current = *new std::shared_ptr<Installed>;  // guarded by `locked`
std::atomic<bool> have_sink{false};     // current != nullptr, read without the lock
thread_local int in_sink = 0;           // calls of a sink on this thread

void lock() noexcept {
  while (locked.exchange(true, std::memory_order_acquire)) std::this_thread::yield();
}
void unlock() noexcept { locked.store(false, std::memory_order_release); }

// A fork keeps only the forking thread: the lock is not held across it, and
// the calls of threads the child lacks are forgotten (else the child's next
// set_log_sink would wait for them forever).
void before_fork() noexcept { lock(); }
void after_fork_parent() noexcept { unlock(); }
void after_fork_child() noexcept {
  if (current) current->calls = in_sink;
  unlock();
}

// One call of the sink `s` on this thread, counted while it runs.
class SinkCall {
 public:
  explicit SinkCall(std::shared_ptr<Installed> s) : s_(std::move(s)) { ++in_sink; }
  ~SinkCall() {
    --in_sink;
    lock();
    --s_->calls;
    unlock();
  }
  SinkCall(const SinkCall&) = delete;
  SinkCall& operator=(const SinkCall&) = delete;

 private:
  std::shared_ptr<Installed> s_;
};

// Passes the line to the installed sink; false when there is none, this
// thread is inside a sink already, or the sink failed (the caller writes it
// to stderr then).
bool to_sink(LogLevel level, std::string_view message) {
  if (!have_sink.load(std::memory_order_acquire) || in_sink > 0) return false;
  std::shared_ptr<Installed> s;
  lock();
  s = current;
  if (s) ++s->calls;
  unlock();
  if (!s) return false;
  Installed& installed = *s;
  SinkCall call(std::move(s));
  try {
    std::string line(message);  // NUL-terminated, for C callers
    while (!line.empty() && line.back() == '\n') line.pop_back();
    installed.sink(level, line);
    return true;
#ifdef __GLIBCXX__
  } catch (abi::__forced_unwind&) {
    throw;  // the thread is ending (pthread_exit)
#endif
  } catch (...) {
    return false;
  }
}

void emit(LogLevel level, std::string_view message) {
  if (!to_sink(level, message)) log_to_stderr(message);
}

// SVOD_DEBUG, read once: its level, or 0 and the error of a malformed value.
struct DebugSetting {
  int level = 0;
  std::optional<Error> error;
};

const DebugSetting& debug_setting() noexcept {
  static const DebugSetting setting = [] {
    DebugSetting s;
    try {
      s.level = env_level(EnvVar::Debug);
    } catch (const Error& e) {
      s.error = e;
    }
    return s;
  }();
  return setting;
}

}  // namespace

int debug_level() noexcept { return debug_setting().level; }

void check_debug_level() {
  if (const std::optional<Error>& error = debug_setting().error) throw *error;
}

void log_to_stderr(std::string_view message) noexcept {
  // One writev, so lines from several threads do not interleave; the rest
  // of a short write follows.
  static const char prefix[] = "svod: ";
  static const char newline[] = "\n";
  iovec parts[3] = {{const_cast<char*>(prefix), sizeof(prefix) - 1},
                    {const_cast<char*>(message.data()), message.size()},
                    {const_cast<char*>(newline), 1}};
  iovec* part = parts;
  int left = 3;
  while (left > 0) {
    const ssize_t n = ::writev(STDERR_FILENO, part, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere to report that stderr is gone
    size_t done = static_cast<size_t>(n);
    while (left > 0 && done >= part->iov_len) {
      done -= part->iov_len;
      ++part;
      --left;
    }
    if (left > 0) {
      part->iov_base = static_cast<char*>(part->iov_base) + done;
      part->iov_len -= done;
    }
  }
}

void log_line(std::string_view message) { emit(LogLevel::Debug, message); }

void log_warning(std::string_view message) {
  warnings.fetch_add(1, std::memory_order_relaxed);
  emit(LogLevel::Warning, message);
}

size_t warnings_logged() noexcept { return warnings.load(std::memory_order_relaxed); }

void set_log_sink(LogSink sink) {
  static std::once_flag fork_handlers;
  std::call_once(fork_handlers, [] { pthread_atfork(before_fork, after_fork_parent, after_fork_child); });
  std::shared_ptr<Installed> next = sink ? std::make_shared<Installed>(std::move(sink)) : nullptr;
  lock();
  std::shared_ptr<Installed> old = std::exchange(current, std::move(next));
  have_sink.store(current != nullptr, std::memory_order_release);
  unlock();
  if (!old || in_sink > 0) return;  // from inside a sink: its own call would never end
  // Calls of the old sink are short (a line), and replacing a sink is rare:
  // a poll, not a condition variable that a fork could leave with waiters.
  for (;;) {
    lock();
    const bool idle = old->calls <= 0;
    unlock();
    if (idle) return;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

bool log_sink_installed() noexcept { return have_sink.load(std::memory_order_acquire); }

}  // namespace svod
