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

// Calls fn(i) for i in [0, n) in parallel on the pool and returns when all
// are done. The first exception thrown by fn is rethrown here.
template <typename Fn>
void parallel_for(size_t n, Fn&& fn);

}  // namespace svod

#include <oneapi/tbb/parallel_for.h>

#include "svod/base/tsan.h"

namespace svod::detail {
// ThreadSanitizer hand-off address for parallel_for. A global, not a local:
// a task must acquire before it reads anything its caller's stack holds,
// including the captures that would lead it to a local token.
inline char parallel_for_token;
}  // namespace svod::detail

template <typename Fn>
void svod::parallel_for(size_t n, Fn&& fn) {
  thread_pool().execute([&] {
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
