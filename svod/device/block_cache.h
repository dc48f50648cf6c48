// BlockCache: a device's freed allocations kept for reuse.
//
// Compilers' runtimes free and allocate buffers of the same sizes over and
// over (every step of a model, every tuning candidate). A buffer from
// Device::allocate_cached gives its memory back to the device's cache when
// its last reference goes, and a later allocate_cached of the same byte size
// takes it again without asking the device (no mmap, no page faults, no
// driver call). Reused memory is not cleared (in checked mode host blocks
// are poisoned: svod/guard/checked_mode.h). The cache holds at most
// SVOD_BLOCK_CACHE_MB MiB (default 1024; 0 turns it off), giving back the
// oldest blocks first; an allocation that fails frees the cache and tries once
// more. free_cached_blocks() empties every device's cache. A device has two:
// one of its own memory (allocate_cached) and one of the host memory it
// stages through (allocate_host_cached: pinned memory on CUDA).
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>

#include "svod/device/buffer.h"

namespace svod {

class BlockCache : public std::enable_shared_from_this<BlockCache> {
 public:
  // What the cache's blocks are: the device's memory (Device::allocate) or
  // host memory for it (Device::allocate_host).
  enum class Memory { Device, Host };
  BlockCache(Device& device, Memory memory);
  ~BlockCache();
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  // `count` elements of `dtype`: a cached block of that byte size, else a
  // new allocation of the device (as u8 storage), either way returned here
  // when the buffer's last reference goes.
  Buffer allocate(DType dtype, size_t count);
  // Gives every cached block back to the device.
  void clear();
  // Bytes held for reuse now.
  size_t cached_bytes() const;

 private:
  struct Block {
    std::shared_ptr<Storage> storage;
    uint64_t age;
  };
  // Keeps `storage` for reuse, or lets it go when the cache is full.
  void give_back(std::shared_ptr<Storage> storage);
  // Frees the oldest blocks until `bytes` more fit under the limit.
  void make_room(size_t bytes);

  Device& device_;
  const Memory memory_;
  const size_t limit_;
  mutable std::mutex mutex_;
  std::map<size_t, std::deque<Block>> free_;  // by byte size, oldest first
  size_t held_ = 0;
  uint64_t clock_ = 0;
};

// A new cache for `device`, known to free_cached_blocks().
std::shared_ptr<BlockCache> make_block_cache(Device& device, BlockCache::Memory memory);
// Empties the block cache of every device.
void free_cached_blocks();

}  // namespace svod
