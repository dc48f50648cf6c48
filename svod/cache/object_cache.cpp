#include "svod/cache/object_cache.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>
#include <vector>

#include "svod/base/env.h"
#include "svod/base/error.h"
#include "svod/base/file_read.h"
#include "svod/base/file_write.h"
#include "svod/base/log.h"
#include "svod/cache/cache_key.h"

namespace svod {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'S', 'V', 'O', 'D', 'O', 'B', 'J', '1'};
// 2: the artifact kind by name (1 held an enum's value).
constexpr uint32_t kEntrySchema = 2;
constexpr const char* kEntrySuffix = ".svo";
constexpr const char* kTempSuffix = ".tmp";
// A compiler's remembered identity hash: `<identity source>.identity`, one
// line of 32 hex digits and a line describing the compiler (for people).
constexpr const char* kIdentitySuffix = ".identity";
constexpr size_t kMaxIdentityFileBytes = 4096;
// Hits refresh an entry's mtime only when it is older than this, which keeps
// the common hit to one open and one read while LRU order stays accurate to
// the minute.
constexpr auto kTouchAfter = std::chrono::seconds(60);
// A temporary file this old belongs to a writer that died.
constexpr auto kStaleTemp = std::chrono::hours(1);
// Writes between rescans, so entries other processes add are counted.
constexpr uint64_t kRescanWrites = 256;

struct EntryHeader {
  char magic[8];
  uint32_t schema;
  uint32_t kind_size;                     // the artifact kind's name: the first kind_size bytes of kind
  char kind[ArtifactKind::kMaxSize + 1];  // zero after the name
  uint64_t key_low;
  uint64_t key_high;
  uint64_t payload_size;
  uint64_t digest_low;
  uint64_t digest_high;
};
static_assert(sizeof(EntryHeader) == 72);

// The kind a header names; nullopt when it names none (a damaged entry).
std::optional<ArtifactKind> kind_of(const EntryHeader& header) {
  if (header.kind_size > ArtifactKind::kMaxSize) return std::nullopt;
  const std::string_view name(header.kind, header.kind_size);
  if (!ArtifactKind::well_formed(name)) return std::nullopt;
  return ArtifactKind(name);
}

bool is_entry(const fs::path& p) { return p.extension() == kEntrySuffix; }
bool is_identity(const fs::path& p) { return p.extension() == kIdentitySuffix; }
bool is_temp(const fs::path& p) {
  const std::string name = p.filename().string();
  return name.size() > 1 && name[0] == '.' && p.extension() == kTempSuffix;
}

// Covers the kind too, so that a flipped byte of its name is damage, not
// another kind.
Hash128 digest(const Artifact& artifact) {
  Hasher h;
  h.str(artifact.kind.name());
  h.bytes(artifact.bytes);
  return h.finish();
}

// Drops the first `done` bytes from the vector `iov` of `count` pieces.
void advance(iovec*& iov, int& count, size_t done) {
  while (count > 0 && done >= iov->iov_len) {
    done -= iov->iov_len;
    ++iov;
    --count;
  }
  if (count > 0) {
    iov->iov_base = static_cast<char*>(iov->iov_base) + done;
    iov->iov_len -= done;
  }
}

// Writes all of `iov`, retrying short writes and EINTR; false with errno set on failure.
bool write_all(int fd, iovec* iov, int count) {
  while (count > 0) {
    ssize_t n = ::writev(fd, iov, count);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    advance(iov, count, static_cast<size_t>(n));
  }
  return true;
}

bool read_all(int fd, iovec* iov, int count) {
  while (count > 0) {
    ssize_t n = ::readv(fd, iov, count);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) return false;  // shrank under us: treat as damaged
    advance(iov, count, static_cast<size_t>(n));
  }
  return true;
}

// Whether the process that named temporary file `p` (".<key>.<pid>.<n>.tmp")
// is gone. A pid that is alive, or that another process reuses, keeps the
// file until it is stale by age.
bool writer_gone(const fs::path& p) {
  const std::string name = p.filename().string();
  const size_t key_end = name.find('.', 1);
  const size_t pid_end = key_end == std::string::npos ? key_end : name.find('.', key_end + 1);
  if (pid_end == std::string::npos) return false;
  const std::string digits = name.substr(key_end + 1, pid_end - key_end - 1);
  const auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  if (digits.empty() || digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), is_digit)) return false;
  const auto pid = static_cast<pid_t>(std::stol(digits));
  if (pid <= 0 || pid == ::getpid()) return false;
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

struct ScannedEntry {
  fs::path path;
  uint64_t size;
  fs::file_time_type mtime;
};

// Entries in `dir`; removes temporaries of dead or long-gone writers on the
// way. Errors end the scan early: eviction is best effort.
std::vector<ScannedEntry> scan(const fs::path& dir) {
  std::vector<ScannedEntry> entries;
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    std::error_code entry_ec;
    if (is_entry(p)) {
      uint64_t size = it->file_size(entry_ec);
      auto mtime = entry_ec ? fs::file_time_type{} : it->last_write_time(entry_ec);
      if (!entry_ec) entries.push_back({p, size, mtime});
    } else if (is_temp(p)) {
      auto mtime = it->last_write_time(entry_ec);
      if (writer_gone(p) || (!entry_ec && now - mtime > kStaleTemp)) fs::remove(p, entry_ec);
    }
  }
  return entries;
}

}  // namespace

ObjectCacheConfig ObjectCacheConfig::from_env() {
  ObjectCacheConfig config;
  config.max_bytes = static_cast<uint64_t>(env_int(EnvVar::CacheMaxBytes, static_cast<int64_t>(kDefaultMaxBytes)));
  if (env_switch(EnvVar::Cache) == false) return config;
  if (auto dir = env_string(EnvVar::CacheDir))
    config.directory = *dir;
  else if (auto xdg = foreign_env("XDG_CACHE_HOME"))
    config.directory = fs::path(*xdg) / "svod";
  else if (auto home = foreign_env("HOME"))
    config.directory = fs::path(*home) / ".cache" / "svod";
  return config;
}

ObjectCache::ObjectCache(ObjectCacheConfig config) : config_(std::move(config)) {}

fs::path ObjectCache::entry_path(const Hash128& key) const {
  return config_.directory / (key.to_hex() + kEntrySuffix);
}

std::optional<Artifact> ObjectCache::get(const Hash128& key) {
  if (!enabled()) return std::nullopt;
  const fs::path path = entry_path(key);
  // Never waits, whatever has the entry's name: a FIFO there is refused (as
  // damaged, below) rather than opened.
  RegularFile entry = try_open_regular_file(path);
  if (entry.error != 0) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  const FileDescriptor& fd = entry.fd;
  auto damaged = [&]() -> std::optional<Artifact> {
    ::unlink(path.c_str());
    corrupt_.fetch_add(1, std::memory_order_relaxed);
    misses_.fetch_add(1, std::memory_order_relaxed);
    log_debug("object cache: removed damaged entry {}", path.string());
    return std::nullopt;
  };

  if (entry.not_regular()) return damaged();
  const struct stat& st = entry.status;
  const auto file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < sizeof(EntryHeader)) return damaged();
  if (file_size > config_.max_bytes) {
    // Written under a larger budget (put never stores more): not damaged, but
    // not worth reading either; eviction will get to it.
    misses_.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }

  EntryHeader header{};
  Artifact artifact;
  artifact.bytes.resize(file_size - sizeof(EntryHeader));
  iovec iov[2] = {{&header, sizeof header}, {artifact.bytes.data(), artifact.bytes.size()}};
  if (!read_all(fd.get(), iov, artifact.bytes.empty() ? 1 : 2)) return damaged();
  if (std::memcmp(header.magic, kMagic, sizeof kMagic) != 0 || header.schema != kEntrySchema ||
      header.key_low != key.low || header.key_high != key.high || header.payload_size != artifact.bytes.size())
    return damaged();
  const std::optional<ArtifactKind> kind = kind_of(header);
  if (!kind) return damaged();
  artifact.kind = *kind;
  if (digest(artifact) != Hash128{header.digest_low, header.digest_high}) return damaged();

  const auto mtime = std::chrono::seconds(st.st_mtim.tv_sec);
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
      std::chrono::system_clock::now().time_since_epoch());
  if (now - mtime > kTouchAfter) ::futimens(fd.get(), nullptr);  // best effort: a read-only cache still serves
  hits_.fetch_add(1, std::memory_order_relaxed);
  return artifact;
}

bool ObjectCache::ensure_directory() {
  std::call_once(directory_once_, [this] {
    std::error_code ec;
    fs::create_directories(config_.directory, ec);
    if (ec) disable_writes("create the directory", ec.value());
  });
  return writable_.load(std::memory_order_relaxed);
}

void ObjectCache::disable_writes(const char* what, int error) {
  writable_.store(false, std::memory_order_relaxed);
  if (!warned_.exchange(true))
    log_warning("object cache {}: cannot {} ({}); compiled objects will not be cached by this process",
                  config_.directory.string(), what, std::strerror(error));
}

void ObjectCache::put(const Hash128& key, const Artifact& artifact) {
  if (!enabled() || !writable_.load(std::memory_order_relaxed)) return;
  const uint64_t entry_size = sizeof(EntryHeader) + artifact.bytes.size();
  // An entry larger than the budget would only evict everything, itself included.
  if (entry_size > config_.max_bytes) return;
  if (!ensure_directory()) return;

  EntryHeader header{};
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.schema = kEntrySchema;
  const std::string_view kind = artifact.kind.name();
  header.kind_size = static_cast<uint32_t>(kind.size());
  std::memcpy(header.kind, kind.data(), kind.size());
  header.key_low = key.low;
  header.key_high = key.high;
  header.payload_size = artifact.bytes.size();
  const Hash128 d = digest(artifact);
  header.digest_low = d.low;
  header.digest_high = d.high;

  const fs::path final_path = entry_path(key);
  // Temporary names are unique per process (pid plus a process-wide counter,
  // shared by every ObjectCache on any directory); EEXIST can then only be a
  // leftover of a dead process that had the same pid, so try the next name.
  static std::atomic<uint64_t> temp_counter{0};
  fs::path temp_path;
  int raw_fd = -1;
  for (int attempt = 0; attempt < 4 && raw_fd < 0; ++attempt) {
    temp_path = config_.directory / fmt::format(".{}.{}.{}{}", key.to_hex(), ::getpid(),
                                                temp_counter.fetch_add(1, std::memory_order_relaxed), kTempSuffix);
    raw_fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (raw_fd < 0 && errno != EEXIST) break;
  }
  FileDescriptor fd(raw_fd);
  if (fd.get() < 0) return disable_writes("create an entry", errno);
  iovec iov[2] = {{&header, sizeof header}, {const_cast<std::byte*>(artifact.bytes.data()), artifact.bytes.size()}};
  const bool written = write_all(fd.get(), iov, artifact.bytes.empty() ? 1 : 2);
  const int write_errno = errno;
  if (!fd.close() || !written) {
    const int error = written ? errno : write_errno;
    ::unlink(temp_path.c_str());
    return disable_writes("write an entry", error);
  }
  if (::rename(temp_path.c_str(), final_path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp_path.c_str());
    // ENOENT: a process that could not see this one alive (another pid
    // namespace) took the file for a dead writer's. Only this entry is lost.
    if (error == ENOENT) return;
    return disable_writes("publish an entry", error);
  }
  writes_.fetch_add(1, std::memory_order_relaxed);

  const auto size = static_cast<int64_t>(entry_size);
  const bool rescan = estimated_bytes_.load(std::memory_order_relaxed) < 0 ||
                      writes_since_scan_.fetch_add(1, std::memory_order_relaxed) + 1 >= kRescanWrites;
  if (rescan || static_cast<uint64_t>(estimated_bytes_.fetch_add(size, std::memory_order_relaxed) + size) >
                    config_.max_bytes)
    evict_keeping(final_path);
}

void ObjectCache::remove(const Hash128& key) {
  if (enabled()) ::unlink(entry_path(key).c_str());
}

void ObjectCache::evict() { evict_keeping({}); }

void ObjectCache::evict_keeping(const fs::path& keep) {
  if (!enabled()) return;
  // One sweep at a time per process; a writer that finds one running skips
  // its own, since the running sweep will see its entry or the next one will.
  std::unique_lock lock(evict_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  std::vector<ScannedEntry> entries = scan(config_.directory);
  uint64_t total = 0;
  for (const auto& e : entries) total += e.size;
  if (total > config_.max_bytes) {
    const uint64_t target = config_.max_bytes - config_.max_bytes / 10;
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.mtime < b.mtime; });
    for (const auto& e : entries) {
      if (total <= target) break;
      if (e.path == keep) continue;
      std::error_code ec;
      // Another process may have evicted it first; either way it is gone.
      fs::remove(e.path, ec);
      total -= e.size;
      evictions_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  estimated_bytes_.store(static_cast<int64_t>(total), std::memory_order_relaxed);
  writes_since_scan_.store(0, std::memory_order_relaxed);
}

Hash128 ObjectCache::identity_hash(const Compiler& compiler) {
  const std::optional<Hash128> source = enabled() ? compiler.identity_source() : std::nullopt;
  if (!source) return compiler.identity().hash();
  {
    std::lock_guard lock(identities_mutex_);
    for (const auto& [known_source, hash] : identities_)
      if (known_source == *source) return hash;
  }
  const fs::path path = config_.directory / (source->to_hex() + kIdentitySuffix);
  std::optional<Hash128> hash;
  // Never waits: only a regular file of the right size is read; anything
  // else there reads as not remembered, and is replaced.
  if (RegularFile file = try_open_regular_file(path);
      file.error == 0 && !file.not_regular() && file.status.st_size <= static_cast<off_t>(kMaxIdentityFileBytes)) {
    try {
      const std::string text = read_to_end(file.fd, path, "a remembered compiler identity");
      hash = Hash128::from_hex(std::string_view(text).substr(0, text.find('\n')));
    } catch (const Error&) {
    }
  }
  if (hash) {
    log_debug("object cache: compiler identity {} remembered in {}; the compiler is not opened", hash->to_hex(),
              path.string());
  } else {
    const CompilerIdentity& identity = compiler.identity();
    hash = identity.hash();
    // Remembered only when the source still says the same after the
    // compiler was made (the file it stands for was not replaced meanwhile,
    // and it is what was opened).
    if (compiler.identity_source() == source && writable_.load(std::memory_order_relaxed) && ensure_directory()) {
      try {
        // Replaced, never written through: a FIFO in its place would wait for a reader.
        replace_file_atomically(path, fmt::format("{}\n{}\n", hash->to_hex(), identity.describe()));
      } catch (const Error& e) {
        log_debug("object cache: {}", e.what());  // only the next process's opening of the compiler is lost
      }
    }
  }
  std::lock_guard lock(identities_mutex_);
  identities_.emplace_back(*source, *hash);
  return *hash;
}

ObjectCacheUsage ObjectCache::usage() const {
  ObjectCacheUsage usage;
  if (!enabled()) return usage;
  for (const auto& e : scan(config_.directory)) {
    ++usage.entries;
    usage.bytes += e.size;
  }
  return usage;
}

uint64_t ObjectCache::clear() {
  if (!enabled()) return 0;
  uint64_t removed = 0, failed = 0;
  std::string first_failure;
  std::error_code ec;
  for (fs::directory_iterator it(config_.directory, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (!is_entry(p) && !is_temp(p) && !is_identity(p)) continue;
    std::error_code remove_ec;
    if (fs::remove(p, remove_ec)) {
      ++removed;
    } else if (remove_ec) {
      if (failed++ == 0) first_failure = fmt::format("{}: {}", p.string(), remove_ec.message());
    }
  }
  estimated_bytes_.store(-1, std::memory_order_relaxed);
  if (ec && ec != std::errc::no_such_file_or_directory)
    throw make_error(ErrorKind::Io, "cannot list the object cache {}: {} (removed {} file{})",
                     config_.directory.string(), ec.message(), removed, removed == 1 ? "" : "s");
  if (failed > 0)
    throw make_error(ErrorKind::Io, "{} file{} of the object cache could not be removed (removed {}); the first: {}",
                     failed, failed == 1 ? "" : "s", removed, first_failure);
  return removed;
}

ObjectCacheStats ObjectCache::stats() const {
  ObjectCacheStats s;
  s.hits = hits_.load(std::memory_order_relaxed);
  s.misses = misses_.load(std::memory_order_relaxed);
  s.writes = writes_.load(std::memory_order_relaxed);
  s.corrupt = corrupt_.load(std::memory_order_relaxed);
  s.evictions = evictions_.load(std::memory_order_relaxed);
  s.writable = writable_.load(std::memory_order_relaxed);
  return s;
}

namespace {

// The process's cache; `chosen` once from_env() ran or set_object_cache() was called.
struct GlobalObjectCache {
  std::mutex mutex;
  std::shared_ptr<ObjectCache> cache;
  bool chosen = false;
};

GlobalObjectCache& global_object_cache() {
  static GlobalObjectCache global;
  return global;
}

}  // namespace

std::shared_ptr<ObjectCache> object_cache() {
  GlobalObjectCache& g = global_object_cache();
  std::lock_guard lock(g.mutex);
  if (!g.chosen) {
    g.cache = std::make_shared<ObjectCache>(ObjectCacheConfig::from_env());
    g.chosen = true;
  }
  return g.cache;
}

void set_object_cache(std::shared_ptr<ObjectCache> cache) {
  GlobalObjectCache& g = global_object_cache();
  std::lock_guard lock(g.mutex);
  g.cache = std::move(cache);
  g.chosen = true;
}

namespace {

// The compilers' store is the process's object cache while it is on; a bad
// setting (SVOD_CACHE_MAX_BYTES) is reported where objects are cached.
std::shared_ptr<ArtifactStore> current_artifact_store() {
  try {
    std::shared_ptr<ObjectCache> cache = object_cache();
    return cache && cache->enabled() ? cache : nullptr;
  } catch (const Error&) {
    return nullptr;
  }
}

[[maybe_unused]] const bool artifact_store_registered = (register_artifact_store(current_artifact_store), true);

}  // namespace

}  // namespace svod
