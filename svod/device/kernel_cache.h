// KernelCache: the process-wide cache of loaded Programs.
//
// Keys are kernel_key()s (a device scope plus the whole spec); values are
// shared Programs. Lookups are single-flight: when many threads ask for a key
// that is not there yet, one of them builds the Program and the others wait
// for its result. A failed build is reported to every waiter and is not
// cached, so the next request tries again. The cache holds at most
// `capacity` Programs (SVOD_KERNEL_CACHE_MAX, default 4096) and drops the
// least recently used one beyond that; callers own shared_ptrs, so a dropped
// Program stays mapped and callable for as long as anyone still holds it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <type_traits>
#include <unordered_map>

#include "svod/base/hash.h"

namespace svod {

class Program;

struct KernelCacheStats {
  uint64_t hits = 0;       // found ready
  uint64_t misses = 0;     // built by the caller (one per build attempt)
  uint64_t coalesced = 0;  // waited for another thread's build of the same key
  uint64_t failures = 0;   // builds that threw
  uint64_t evictions = 0;  // dropped to stay within capacity
  size_t entries = 0;
  size_t capacity = 0;
  std::chrono::nanoseconds build_time{0};  // total time spent in builds
};

class KernelCache {
 public:
  static constexpr size_t kDefaultCapacity = 4096;

  explicit KernelCache(size_t capacity = kDefaultCapacity);
  ~KernelCache();
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  // The Program cached under `key`, else the result of `build()` (a callable
  // returning std::shared_ptr<const Program>), run by exactly one of the
  // threads asking concurrently. Exceptions from build() propagate to that
  // thread and to every thread waiting on it.
  template <typename Build>
  std::shared_ptr<const Program> get_or_build(const Hash128& key, Build&& build) {
    if (auto hit = lookup(key)) return hit;
    using Fn = std::remove_cvref_t<Build>;
    void* fn = const_cast<Fn*>(std::addressof(build));
    return build_slow(key, [](void* f) -> std::shared_ptr<const Program> { return (*static_cast<Fn*>(f))(); }, fn);
  }

  KernelCacheStats stats() const;
  // Drops every ready entry (builds in flight finish normally).
  void clear();

 private:
  using BuildFn = std::shared_ptr<const Program> (*)(void*);
  struct Flight;
  struct Slot {
    std::shared_ptr<const Program> program;  // null while in flight
    std::shared_ptr<Flight> flight;          // set while in flight
    std::list<Hash128>::iterator lru;        // valid when ready
  };

  std::shared_ptr<const Program> lookup(const Hash128& key);
  std::shared_ptr<const Program> build_slow(const Hash128& key, BuildFn fn, void* build);

  // One mutex: a hit holds it for a map probe and a list splice (tens of
  // nanoseconds), which costs less than sharding would on the hit path.
  mutable std::mutex mutex_;
  std::unordered_map<Hash128, Slot, Hash128Hasher> slots_;
  std::list<Hash128> lru_;  // most recently used first; ready entries only
  size_t capacity_;
  KernelCacheStats stats_;
};

// The process's kernel cache, sized by SVOD_KERNEL_CACHE_MAX.
KernelCache& kernel_cache();

// A fresh scope id for kernel_key(): one per device instance, so Programs,
// which point at their device, are only shared within it.
uint64_t new_cache_scope() noexcept;

namespace detail {
// Where the builds on the calling thread got their Program: DiskCache once
// load_or_compile (device.h) has loaded a stored object, else Compiled. The
// kernel cache takes it (which starts it over) around each build, to report
// disk hits and compiles apart under SVOD_DEBUG.
enum class BuildSource { Compiled, DiskCache };
BuildSource take_build_source() noexcept;
void note_build_source(BuildSource source) noexcept;
}  // namespace detail

}  // namespace svod
