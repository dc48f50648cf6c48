// `svod cache stats` and `svod cache clear`: inspect and empty the on-disk
// object cache that SVOD_CACHE, SVOD_CACHE_DIR and SVOD_CACHE_MAX_BYTES select.
#include <fmt/format.h>

#include "svod/cache/object_cache.h"
#include "tools/svod/commands.h"

namespace svod::cli {
namespace {

std::string human_bytes(uint64_t bytes) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, kUnits[unit]);
}

}  // namespace

int cache_stats() {
  ObjectCache cache(ObjectCacheConfig::from_env());
  if (!cache.enabled()) {
    fmt::print("object cache: off (SVOD_CACHE=0, or no SVOD_CACHE_DIR, XDG_CACHE_HOME or HOME)\n");
    return 0;
  }
  const ObjectCacheUsage usage = cache.usage();
  fmt::print("object cache: {}\n", cache.directory().string());
  fmt::print("  entries: {}\n", usage.entries);
  fmt::print("  size:    {} of {} budget ({:.1f}%)\n", human_bytes(usage.bytes), human_bytes(cache.max_bytes()),
             cache.max_bytes() ? 100.0 * static_cast<double>(usage.bytes) / static_cast<double>(cache.max_bytes())
                               : 0.0);
  // Hits and misses are counted per process (ObjectCache::stats); nothing
  // persists them, so the tool has no rate to show for past runs.
  fmt::print("  hit rate: not recorded across processes (per-process counters: ObjectCache::stats)\n");
  return 0;
}

int cache_clear() {
  ObjectCache cache(ObjectCacheConfig::from_env());
  if (!cache.enabled()) {
    fmt::print("object cache: off; nothing to clear\n");
    return 0;
  }
  const uint64_t removed = cache.clear();
  fmt::print("removed {} file{} from {}\n", removed, removed == 1 ? "" : "s", cache.directory().string());
  return 0;
}

}  // namespace svod::cli
