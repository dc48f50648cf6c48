#include "svod/base/thread_pool.h"

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>

#include <algorithm>
#include <atomic>
#include <new>
#include <optional>

#include "svod/base/env.h"
#include "svod/base/error.h"

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
      const int64_t requested = env_int("SVOD_THREADS", 0);
      if (requested < 0 || requested > 4096)
        throw make_error(ErrorKind::Validation, "SVOD_THREADS={} is out of range [1, 4096]", requested);
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

  ~Pool() {
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

tbb::task_arena& thread_pool() {
  static Pool pool;
  return pool.arena;
}

}  // namespace svod
