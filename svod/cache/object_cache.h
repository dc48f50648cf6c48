// ObjectCache: compiled objects kept on disk so they outlive the process.
//
// Entries are content-addressed by object_key() (source, compiler input and
// the full compiler identity), one file per entry, `<directory>/<key>.svo`.
// Each file starts with a header holding its key, its artifact kind and a
// digest of its payload; a truncated, corrupt or foreign file reads as a miss
// and is removed, never as a wrong kernel. Entries are written to a temporary
// file and renamed into place, so concurrent processes see an entry whole or
// not at all (two writers of one key both succeed; the last rename wins with
// identical content). The directory is bounded by a byte budget: a hit
// refreshes the entry's mtime (at most once a minute), and when the budget is
// exceeded the least recently used entries go first, down to 90% of the budget
// so that a full cache does not rescan the directory on every write.
//
// A writer killed mid-write leaves only its temporary file
// (`.<key>.<pid>.<n>.tmp`), never a partial entry. Every scan of the
// directory (a process's first write, eviction, usage(), clear()) removes
// temporary files whose writing process no longer exists, and any older than
// an hour (a writer in another pid namespace or on another machine).
//
// Failing to create or write the directory (read-only or full disk) turns
// writing off for the rest of the process with a single warning; compiles
// keep working, uncached.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "svod/base/hash.h"
#include "svod/compile/artifact_store.h"
#include "svod/compile/compiler.h"

namespace svod {

struct ObjectCacheConfig {
  static constexpr uint64_t kDefaultMaxBytes = uint64_t{1} << 30;

  std::filesystem::path directory;  // empty: the cache is off
  uint64_t max_bytes = kDefaultMaxBytes;

  // SVOD_CACHE=0 turns the cache off. The directory is SVOD_CACHE_DIR, else
  // $XDG_CACHE_HOME/svod, else $HOME/.cache/svod (off when none is set); the
  // budget is SVOD_CACHE_MAX_BYTES. Throws Error(Validation) on a malformed value.
  static ObjectCacheConfig from_env();
};

struct ObjectCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t writes = 0;
  uint64_t corrupt = 0;       // entries found damaged or foreign, removed
  uint64_t evictions = 0;     // entries removed to stay within the budget
  bool writable = true;       // false once a write failed (see the header)
};

struct ObjectCacheUsage {
  uint64_t entries = 0;
  uint64_t bytes = 0;
};

// The process's object cache (object_cache()), when it is on, is also the
// compilers' ArtifactStore.
class ObjectCache final : public ArtifactStore {
 public:
  explicit ObjectCache(ObjectCacheConfig config);

  bool enabled() const noexcept { return !config_.directory.empty(); }
  const std::filesystem::path& directory() const noexcept { return config_.directory; }
  uint64_t max_bytes() const noexcept { return config_.max_bytes; }
  std::filesystem::path entry_path(const Hash128& key) const;

  // The artifact stored under `key`, or nullopt (absent, damaged, or off).
  // Never waits: a FIFO, device or folder in the entry's place is damaged.
  std::optional<Artifact> get(const Hash128& key) override;
  // Publishes an entry. Never throws: failures only degrade the cache.
  void put(const Hash128& key, const Artifact& artifact) override;
  void remove(const Hash128& key) override;

  // compiler.identity().hash(), remembered in the directory under
  // compiler.identity_source() when the compiler has one: a later process
  // keys its objects without creating the compiler (for the in-process LLVM,
  // without opening libsvod_llvm.so and libLLVM, 7 of a warm run's 20 ms).
  Hash128 identity_hash(const Compiler& compiler);

  // Scans the directory now.
  ObjectCacheUsage usage() const;
  // Removes every entry, remembered identity and leftover temporary file;
  // returns how many files went. Error(Io) naming the first file that stayed
  // (and how many went) when any could not be removed: a read-only cache is
  // never reported as cleared.
  uint64_t clear();
  // Removes least recently used entries until the budget holds (with the
  // 90% margin). Runs on its own after writes; public for tools and tests.
  void evict();

  ObjectCacheStats stats() const;

 private:
  bool ensure_directory();
  void disable_writes(const char* what, int error);
  void evict_keeping(const std::filesystem::path& keep);

  ObjectCacheConfig config_;
  std::once_flag directory_once_;
  std::atomic<bool> writable_{true};
  std::atomic<bool> warned_{false};
  std::atomic<uint64_t> hits_{0}, misses_{0}, writes_{0}, corrupt_{0}, evictions_{0};
  // This process's estimate of the bytes stored; negative until the first
  // scan. Other processes' writes are picked up by periodic rescans.
  std::atomic<int64_t> estimated_bytes_{-1};
  std::atomic<uint64_t> writes_since_scan_{0};
  std::mutex evict_mutex_;
  std::mutex identities_mutex_;
  std::vector<std::pair<Hash128, Hash128>> identities_;  // identity source, identity hash
};

// The process's object cache, from ObjectCacheConfig::from_env() on first use.
std::shared_ptr<ObjectCache> object_cache();
// Replaces the process's object cache (nullptr turns it off), e.g. to point
// an embedding application or a test at its own directory.
void set_object_cache(std::shared_ptr<ObjectCache> cache);

}  // namespace svod
