#include "svod/base/thread_pool.h"

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/task_arena.h>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
#include <optional>
#include <thread>

#include "svod/base/env.h"
#include "svod/base/error.h"
#include "svod/base/thread_pool_start.h"

namespace svod {

int thread_count() {
  // Read once; a bad value is thrown at every call rather than out of the
  // initializer, which other threads may be waiting on.
  struct Count {
    int threads = 0;
    std::optional<Error> error;
  };
  static const Count count = [] {
    Count c;
    try {
      const int64_t requested = env_int(EnvVar::Threads, 0);
      c.threads = requested > 0 ? static_cast<int>(requested) : tbb::info::default_concurrency();
    } catch (const Error& e) {
      c.error = e;
    }
    return c;
  }();
  if (count.error) throw *count.error;
  return count.threads;
}

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
std::atomic<bool> join_at_exit{true};
// Whether anything but start_thread_pool() has asked for the pool, so that
// oneTBB may have started workers.
std::atomic<bool> pool_used{false};
// start_thread_pool()'s prepare_worker.
std::atomic<void (*)() noexcept> worker_preparation{nullptr};

// The child of a fork copies oneTBB's state, workers included, but not their
// threads: waiting for them at exit would wait for ever, so the child does
// not (its launches run on its one thread). A child forked before any use
// (after start_thread_pool() alone) has no worker to miss, and joins its own.
void after_fork_in_child() noexcept {
  if (pool_used.load(std::memory_order_relaxed)) join_at_exit.store(false, std::memory_order_relaxed);
}

// Waits for start_thread_pool()'s thread, if one was started, telling it to
// do nothing if it has not begun (below).
void stop_thread_pool_start() noexcept;

// The arena and a handle on the scheduler behind it. At process exit the
// workers are joined, not merely told to stop, so that they are gone — and
// their thread-local data destroyed — before anything that runs last at exit
// (atexit handlers, LeakSanitizer's scan) looks at the process's threads.
// More threads than cores (SVOD_THREADS) need oneTBB's worker limit raised
// first, or it keeps the default and warns on stderr at every run.
struct Pool {
  tbb::task_scheduler_handle scheduler{tbb::attach{}};
  tbb::global_control workers{tbb::global_control::max_allowed_parallelism,
                              static_cast<size_t>(std::max(thread_count(), tbb::info::default_concurrency()))};
  tbb::task_arena arena{thread_count()};

  Pool() { (void)::pthread_atfork(nullptr, nullptr, &after_fork_in_child); }

  ~Pool() {
    // start_thread_pool()'s thread may still be setting the arena up:
    // releasing the scheduler meanwhile would leave the two waiting on each
    // other.
    stop_thread_pool_start();
    if (!join_at_exit.load(std::memory_order_relaxed)) return;  // the handle and arena release without waiting
    arena.terminate();
    // Fails (and returns) when exit is called from inside a task; the
    // workers are then left to the library, as without this handle.
    (void)tbb::finalize(scheduler, std::nothrow);
  }
};

}  // namespace

void skip_pool_join_at_exit() noexcept {
  if (!kSanitized) join_at_exit.store(false, std::memory_order_relaxed);
}

namespace {

tbb::task_arena& pool_arena() {
  static Pool pool;
  return pool.arena;
}

}  // namespace

tbb::task_arena& thread_pool() {
  if (!pool_used.load(std::memory_order_relaxed)) [[unlikely]]
    pool_used.store(true, std::memory_order_relaxed);
  return pool_arena();
}

namespace {

// start_thread_pool()'s thread, which makes the pool and sets up its arena:
// oneTBB's one-time start (its allocator and RML libraries opened, the
// machine's CPUs read), its market and the arena's slots, several
// milliseconds of one core that the first parallel launch otherwise waits
// for. Opening the device starts no worker, so a process that opens it and
// forks copies no thread it has not got, and one that never compiles never
// has them. Once a program is made (join_thread_pool: launches are likely
// to follow), a thread of the same kind starts the workers — oneTBB creates
// them at the first parallel work, 0.2-0.7 ms on the thread that asks, which
// would otherwise be the first launch's. Made once and never destroyed, so
// that the fork handlers can reach it at any time; ExitJoin and ~Pool wait
// for its thread at exit.
class Starter {
 public:
  void start() noexcept {
    std::lock_guard lock(mutex_);
    if (requested_) return;
    requested_ = true;
    (void)::pthread_atfork(&before_fork, &after_fork, &after_fork);
    try {
      thread_ = std::thread([this] { run(); });
    } catch (...) {  // no thread: the pool is made at its first use, as before
    }
  }

  // Waits for the thread to end; `stop`: it does nothing if it has not begun.
  void finish(bool stop) noexcept {
    if (stop) stopping_.store(true, std::memory_order_relaxed);
    std::lock_guard lock(mutex_);
    if (thread_.joinable()) thread_.join();
  }

  // Whether the thread has made the pool and set up its arena.
  bool made() const noexcept { return made_.load(std::memory_order_acquire); }

  // Asks for the pool's workers to be started, once, off the calling thread:
  // by the thread that makes the pool when it has not yet, else by one
  // started now.
  void start_workers() noexcept {
#if defined(__SANITIZE_THREAD__)
    // Under ThreadSanitizer, with the workers started ahead, a plan run
    // right after its program was made ran its two independent kernels one
    // after the other (6 of 8 fresh processes; the cause was not found, and
    // release builds never did, 30 of 30): workers start at the first launch
    // there, as they did before.
    return;
#endif
    workers_wanted_.store(true, std::memory_order_release);
    if (!made() || !claim_workers()) return;
    std::lock_guard lock(mutex_);
    if (thread_.joinable()) thread_.join();  // the pool is made: it is ending
    try {
      thread_ = std::thread([] { run_workers(); });
    } catch (...) {  // no thread: the first launch starts them, as before
    }
  }

 private:
  void run() noexcept {
    if (stopping_.load(std::memory_order_relaxed)) return;
    try {
      pool_arena().initialize();
      made_.store(true, std::memory_order_release);
    } catch (...) {  // a bad SVOD_THREADS: thrown again at the pool's first use
      return;
    }
    if (workers_wanted_.load(std::memory_order_acquire) && claim_workers()) run_workers();
  }

  // True for the one caller that starts the workers.
  bool claim_workers() noexcept { return !workers_claimed_.exchange(true, std::memory_order_acq_rel); }

  // A task for each worker, enqueued (this thread takes no slot of the
  // arena, which a plan run at the same time may want), which makes oneTBB
  // create the workers; each runs start_thread_pool()'s prepare_worker, if
  // any, on the worker that takes it (most often one task a worker).
  static void run_workers() noexcept {
    if (stopping_workers()) return;
    try {
      tbb::task_arena& arena = thread_pool();
      void (*const prepare)() noexcept = worker_preparation.load(std::memory_order_acquire);
      for (int i = 1; i < thread_count(); ++i)
        arena.enqueue([prepare] {
          if (prepare) prepare();
        });
    } catch (...) {
    }
  }
  static bool stopping_workers() noexcept;

  // A fork copies only the thread that forks: one in the middle of making
  // the pool would leave the child's copy half made, its locks held for
  // ever. So a fork waits for the thread, and holds the lock across the fork.
  static void before_fork() noexcept;
  static void after_fork() noexcept;

  std::mutex mutex_;
  bool requested_ = false;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> made_{false};
  std::atomic<bool> workers_wanted_{false};
  std::atomic<bool> workers_claimed_{false};
};

Starter& starter() {
  static Starter* const s = new Starter;
  return *s;
}

bool Starter::stopping_workers() noexcept { return starter().stopping_.load(std::memory_order_relaxed); }

void Starter::before_fork() noexcept {
  Starter& s = starter();
  s.mutex_.lock();
  if (s.thread_.joinable()) s.thread_.join();
}

void Starter::after_fork() noexcept { starter().mutex_.unlock(); }

// Made before the thread starts, so destroyed after anything made after it
// (the pool, if the thread has not finished making it when exit begins):
// exit waits for the thread rather than destroy what it is using.
struct ExitJoin {
  ~ExitJoin() { stop_thread_pool_start(); }
};

std::atomic<bool> start_requested{false};

void stop_thread_pool_start() noexcept {
  if (start_requested.load(std::memory_order_acquire)) starter().finish(true);
}

}  // namespace

void start_thread_pool(void (*prepare_worker)() noexcept) noexcept {
  static ExitJoin exit_join;
  if (prepare_worker) worker_preparation.store(prepare_worker, std::memory_order_release);
  start_requested.store(true, std::memory_order_release);
  starter().start();
}

void finish_thread_pool_start() noexcept {
  if (start_requested.load(std::memory_order_acquire)) starter().finish(false);
}

void join_thread_pool() noexcept {
  thread_local bool joined = false;
  if (joined || !start_requested.load(std::memory_order_acquire)) return;
  starter().start_workers();
  if (!starter().made()) return;
  joined = true;
  try {
    // Registers the thread with oneTBB's scheduler (its thread data, and the
    // bounds of its stack, which for the main thread glibc reads from
    // /proc/self/maps) in the thread's own implicit arena: unlike
    // thread_pool().execute, this never waits for a slot of the pool that
    // other threads hold.
    tbb::this_task_arena::isolate([] {});
  } catch (...) {
  }
}

}  // namespace svod
