// The one host thread pool: a oneTBB arena sized by SVOD_THREADS (default:
// the hardware's concurrency). Plan DAGs, core_id fan-out and parallel
// compiles all run in it, so nested parallelism composes instead of
// oversubscribing the machine.
#pragma once

#include <oneapi/tbb/task_arena.h>

#include <cstddef>

namespace svod {

// Worker count of the pool (SVOD_THREADS, else hardware concurrency).
int thread_count();

// The arena itself; created on first use.
tbb::task_arena& thread_pool();

// At exit the pool's workers are joined (see thread_pool.cpp). A process
// that has nothing left for them to do and only ends (the svod CLI once its
// command returned) calls this first: exit then leaves them to the kernel
// instead of waiting while each spins (sched_yield) out of its arena, which
// costs milliseconds, and far more on a loaded machine. No-op in sanitizer
// builds, where the join is what keeps LeakSanitizer's exit scan working.
void skip_pool_join_at_exit() noexcept;

// Runs fn() inside the pool and returns when it is done. When other threads
// hold the arena's slots, oneTBB hands fn to a worker; the hand-off is
// marked for ThreadSanitizer here, so callers need not.
template <typename Fn>
void run_in_pool(Fn&& fn);

// Calls fn(i) for i in [0, n) in parallel on the pool and returns when all
// are done. The first exception thrown by fn is rethrown here.
template <typename Fn>
void parallel_for(size_t n, Fn&& fn);

}  // namespace svod

#include <oneapi/tbb/parallel_for.h>

#include "svod/base/tsan.h"

namespace svod::detail {
// ThreadSanitizer hand-off addresses for run_in_pool and parallel_for.
// Globals, not locals: a task must acquire before it reads anything its
// caller's stack holds, including the captures that would lead it to a
// local token.
inline char pool_token;
inline char parallel_for_token;
}  // namespace svod::detail

template <typename Fn>
void svod::run_in_pool(Fn&& fn) {
  auto body = [&] {
    detail::handoff_acquire(&detail::pool_token);
    fn();
    detail::handoff_release(&detail::pool_token);
  };
  // After the body exists: a worker reads it (and what it captures) from this stack.
  detail::handoff_release(&detail::pool_token);
  thread_pool().execute(body);
  detail::handoff_acquire(&detail::pool_token);
}

template <typename Fn>
void svod::parallel_for(size_t n, Fn&& fn) {
  run_in_pool([&] {
    auto body = [&](size_t i) {
      detail::handoff_acquire(&detail::parallel_for_token);
      fn(i);
      detail::handoff_release(&detail::parallel_for_token);
    };
    // After the body exists: tasks read it (and what it captures) from this stack.
    detail::handoff_release(&detail::parallel_for_token);
    tbb::parallel_for(size_t{0}, n, body, tbb::simple_partitioner());
  });
  detail::handoff_acquire(&detail::parallel_for_token);
}
