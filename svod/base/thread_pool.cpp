#include "svod/base/thread_pool.h"

#include <oneapi/tbb/info.h>

#include "svod/base/env.h"
#include "svod/base/error.h"

namespace svod {

int thread_count() {
  static const int count = [] {
    int64_t requested = env_int("SVOD_THREADS", 0);
    if (requested < 0 || requested > 4096)
      throw make_error(ErrorKind::Validation, "SVOD_THREADS={} is out of range [1, 4096]", requested);
    return requested > 0 ? static_cast<int>(requested) : tbb::info::default_concurrency();
  }();
  return count;
}

tbb::task_arena& thread_pool() {
  static tbb::task_arena arena(thread_count());
  return arena;
}

}  // namespace svod
