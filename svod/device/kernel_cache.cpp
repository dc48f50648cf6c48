#include "svod/device/kernel_cache.h"

#include <atomic>
#include <chrono>
#include <future>
#include <utility>
#include <vector>

#include "svod/base/env.h"
#include "svod/base/error.h"
#include "svod/base/log.h"
#include "svod/device/device.h"

namespace svod {

namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

// With SVOD_DEBUG >= 1 every request is reported as one line: a memory hit,
// a disk-cache hit (the build loaded a stored object, as load_or_compile
// tells through detail::take_build_source) or a compile, each with the time
// it took.

// A build in progress. Waiters copy the shared_future under the cache mutex
// and block on it outside, so a slow compile never holds the mutex.
struct KernelCache::Flight {
  std::promise<std::shared_ptr<const Program>> promise;
  std::shared_future<std::shared_ptr<const Program>> result = promise.get_future().share();
};

KernelCache::KernelCache(size_t capacity) : capacity_(capacity) { stats_.capacity = capacity; }

KernelCache::~KernelCache() = default;

std::shared_ptr<const Program> KernelCache::lookup(const Hash128& key) {
  const bool logged = debug_level() >= 1;
  const auto start = logged ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  std::shared_ptr<const Program> program;
  {
    std::lock_guard lock(mutex_);
    auto it = slots_.find(key);
    if (it == slots_.end() || !it->second.program) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    ++stats_.hits;
    program = it->second.program;
  }
  if (logged) [[unlikely]]
    log_debug("kernel cache: memory hit {} ({}) in {:.3f} ms", key.to_hex(), program->spec().display_name(),
                  ms_since(start));
  return program;
}

std::shared_ptr<const Program> KernelCache::build_slow(const Hash128& key, BuildFn fn, void* build) {
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<Flight> flight;
  {
    std::unique_lock lock(mutex_);
    auto [it, inserted] = slots_.try_emplace(key);
    Slot& slot = it->second;
    if (!inserted) {
      // Lost the race to another builder, or it finished in between.
      if (slot.program) {
        lru_.splice(lru_.begin(), lru_, slot.lru);
        ++stats_.hits;
        std::shared_ptr<const Program> program = slot.program;
        lock.unlock();
        if (debug_level() >= 1) [[unlikely]]
          log_debug("kernel cache: memory hit {} ({}) in {:.3f} ms", key.to_hex(), program->spec().display_name(),
                        ms_since(start));
        return program;
      }
      ++stats_.coalesced;
      auto result = slot.flight->result;
      lock.unlock();
      try {
        std::shared_ptr<const Program> program = result.get();
        if (debug_level() >= 1) [[unlikely]]
          log_debug("kernel cache: memory hit {} ({}) in {:.1f} ms, waiting for another thread's build",
                        key.to_hex(), program->spec().display_name(), ms_since(start));
        return program;
      } catch (const Error& e) {
        // A copy of its own for each waiter (see the builder's catch below).
        throw Error(e.kind(), e.what());
      }
    }
    flight = std::make_shared<Flight>();
    slot.flight = flight;
    ++stats_.misses;
  }

  const auto build_start = std::chrono::steady_clock::now();
  std::shared_ptr<const Program> program;
  detail::take_build_source();  // start over: a build that does not say otherwise compiled
  try {
    program = fn(build);
    if (!program) throw make_error(ErrorKind::Internal, "kernel cache: a build returned no program");
  } catch (...) {
    {
      std::lock_guard lock(mutex_);
      slots_.erase(key);
      ++stats_.failures;
      stats_.build_time += std::chrono::steady_clock::now() - build_start;
    }
    // Waiters get a separate exception object from the one this thread
    // rethrows, and copy it again before throwing: no two threads then share
    // an exception whose last owner frees it while another still reads it.
    std::exception_ptr for_waiters;
    try {
      throw;
    } catch (const Error& e) {
      for_waiters = std::make_exception_ptr(Error(e.kind(), e.what()));
    } catch (...) {
      for_waiters = std::current_exception();
    }
    flight->promise.set_exception(for_waiters);
    throw;
  }

  // Evicted Programs are released after the mutex is dropped: the last
  // reference unmaps code, which has no business inside the critical section.
  std::vector<std::shared_ptr<const Program>> evicted;
  {
    std::lock_guard lock(mutex_);
    Slot& slot = slots_.at(key);
    slot.program = program;
    slot.flight.reset();
    lru_.push_front(key);
    slot.lru = lru_.begin();
    stats_.build_time += std::chrono::steady_clock::now() - build_start;
    while (lru_.size() > capacity_) {
      auto victim = slots_.find(lru_.back());
      evicted.push_back(std::move(victim->second.program));
      slots_.erase(victim);
      lru_.pop_back();
      ++stats_.evictions;
    }
  }
  if (debug_level() >= 1) [[unlikely]] {
    const bool from_disk = detail::take_build_source() == detail::BuildSource::DiskCache;
    log_debug("kernel cache: {} {} ({}) in {:.1f} ms", from_disk ? "disk hit, loaded" : "compiled", key.to_hex(),
                  program->spec().display_name(), ms_since(build_start));
  }
  flight->promise.set_value(program);
  return program;
}

KernelCacheStats KernelCache::stats() const {
  std::lock_guard lock(mutex_);
  KernelCacheStats s = stats_;
  s.entries = lru_.size();
  return s;
}

void KernelCache::clear() {
  std::vector<std::shared_ptr<const Program>> dropped;
  std::lock_guard lock(mutex_);
  for (auto it = slots_.begin(); it != slots_.end();) {
    if (it->second.program) {
      dropped.push_back(std::move(it->second.program));
      it = slots_.erase(it);
    } else {
      ++it;
    }
  }
  lru_.clear();
}

KernelCache& kernel_cache() {
  static KernelCache cache([] {
    return static_cast<size_t>(env_int(EnvVar::KernelCacheMax, static_cast<int64_t>(KernelCache::kDefaultCapacity)));
  }());
  return cache;
}

namespace {
// How the builds on this thread since the last take_build_source() got their Program.
thread_local detail::BuildSource build_source = detail::BuildSource::Compiled;
}  // namespace

detail::BuildSource detail::take_build_source() noexcept {
  return std::exchange(build_source, BuildSource::Compiled);
}

void detail::note_build_source(BuildSource source) noexcept { build_source = source; }

uint64_t new_cache_scope() noexcept {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace svod
