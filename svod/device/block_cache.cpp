#include "svod/device/block_cache.h"

#include <algorithm>
#include <vector>

#include "svod/base/env.h"
#include "svod/base/error.h"
#include "svod/device/device.h"
#include "svod/guard/checked_mode.h"

namespace svod {
namespace {

// Every live cache, for free_cached_blocks().
std::mutex registry_mutex;
std::vector<std::weak_ptr<BlockCache>>& registry() {
  static auto* caches = new std::vector<std::weak_ptr<BlockCache>>();  // leaked: used at exit
  return *caches;
}

size_t cache_limit() {
  return static_cast<size_t>(env_int(EnvVar::BlockCacheMb, 1024)) << 20;
}

}  // namespace

BlockCache::BlockCache(Device& device, Memory memory) : device_(device), memory_(memory), limit_(cache_limit()) {}

BlockCache::~BlockCache() = default;

Buffer BlockCache::allocate(DType dtype, size_t count) {
  const size_t bytes = checked_byte_size(dtype, count);
  std::shared_ptr<Storage> storage;
  {
    std::lock_guard lock(mutex_);
    if (auto it = free_.find(bytes); it != free_.end()) {
      storage = std::move(it->second.back().storage);  // the most recently used: warm in cache
      it->second.pop_back();
      if (it->second.empty()) free_.erase(it);
      held_ -= bytes;
    }
  }
  if (!storage) {
    auto fresh = [&] {
      return (memory_ == Memory::Host ? device_.allocate_host(DType::U8, bytes) : device_.allocate(DType::U8, bytes))
          .storage_ptr();
    };
    try {
      storage = fresh();
    } catch (const Error&) {
      clear();
      storage = fresh();
    }
  }
  // Reused memory is not cleared; in checked mode it is poisoned (fresh
  // memory too), so that a read of what nobody wrote shows.
  if (void* host = storage->host_data(); host != nullptr && check_mode().memory) poison(host, bytes, dtype);
  // The buffer's reference: when it goes, the storage comes back here (or is
  // freed, when the cache is gone or full).
  std::weak_ptr<BlockCache> home = weak_from_this();
  Storage* raw = storage.get();
  std::shared_ptr<Storage> lent(raw, [home, storage = std::move(storage)](Storage*) mutable {
    if (auto cache = home.lock()) cache->give_back(std::move(storage));
  });
  return Buffer(std::move(lent), dtype, 0, bytes);
}

void BlockCache::give_back(std::shared_ptr<Storage> storage) {
  const size_t bytes = storage->bytes();
  std::shared_ptr<Storage> dropped;  // freed outside the lock
  std::lock_guard lock(mutex_);
  if (bytes > limit_) {
    dropped = std::move(storage);
    return;
  }
  make_room(bytes);
  free_[bytes].push_back(Block{std::move(storage), clock_++});
  held_ += bytes;
}

void BlockCache::make_room(size_t bytes) {
  while (held_ + bytes > limit_ && !free_.empty()) {
    auto oldest = std::min_element(free_.begin(), free_.end(), [](const auto& a, const auto& b) {
      return a.second.front().age < b.second.front().age;
    });
    held_ -= oldest->first;
    oldest->second.pop_front();
    if (oldest->second.empty()) free_.erase(oldest);
  }
}

void BlockCache::clear() {
  std::map<size_t, std::deque<Block>> blocks;
  {
    std::lock_guard lock(mutex_);
    blocks.swap(free_);
    held_ = 0;
  }
}

size_t BlockCache::cached_bytes() const {
  std::lock_guard lock(mutex_);
  return held_;
}

std::shared_ptr<BlockCache> make_block_cache(Device& device, BlockCache::Memory memory) {
  auto cache = std::make_shared<BlockCache>(device, memory);
  std::lock_guard lock(registry_mutex);
  auto& all = registry();
  std::erase_if(all, [](const auto& c) { return c.expired(); });
  all.push_back(cache);
  return cache;
}

void free_cached_blocks() {
  std::vector<std::shared_ptr<BlockCache>> caches;
  {
    std::lock_guard lock(registry_mutex);
    for (const auto& c : registry())
      if (auto cache = c.lock()) caches.push_back(std::move(cache));
  }
  for (const auto& cache : caches) cache->clear();
}

}  // namespace svod
