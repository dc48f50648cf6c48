// Happens-before marks for ThreadSanitizer across oneTBB.
//
// Debian's oneTBB is not built with ThreadSanitizer, so TSan cannot see that a
// task happens after the code that spawned it, or a wait after the tasks it
// waited for. svod marks those edges on one address per hand-off; without
// TSan these compile to nothing.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define SVOD_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SVOD_TSAN 1
#endif
#endif
#ifdef SVOD_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace svod::detail {

#ifdef SVOD_TSAN
inline void handoff_release(void* token) { __tsan_release(token); }
inline void handoff_acquire(void* token) { __tsan_acquire(token); }
#else
inline void handoff_release(void*) {}
inline void handoff_acquire(void*) {}
#endif

}  // namespace svod::detail
