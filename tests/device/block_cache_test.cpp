// The block cache behind Device::allocate_cached: freed blocks come back for
// the next allocation of their byte size, the cache stays under its limit
// (oldest blocks go first), free_cached_blocks() empties it, and buffers
// freed from many threads at once are all accounted for.
#include "svod/device/block_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <thread>
#include <vector>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/base/error.h"
#include "svod/guard/checked_mode.h"

namespace svod {
namespace {

// A cache of at most `mb` MiB over the CPU device.
std::shared_ptr<BlockCache> cache_of(int mb) {
  ::setenv("SVOD_BLOCK_CACHE_MB", std::to_string(mb).c_str(), 1);
  auto cache = make_block_cache(*cpu_device(), BlockCache::Memory::Device);
  ::unsetenv("SVOD_BLOCK_CACHE_MB");
  return cache;
}

// Checked mode (memory): blocks, fresh or reused, come poisoned, so that a
// kernel reading what nobody wrote sees NaN; the memory is guarded.
TEST(BlockCache, CheckedModePoisonsEveryBlockItHandsOut) {
  auto cache = cache_of(16);
  const CheckMode before = check_mode();
  set_check_mode(CheckMode{.memory = true});
  Buffer a = cache->allocate(DType::F32, 256);
  EXPECT_TRUE(a.storage().guarded());
  EXPECT_TRUE(std::isnan(a.span<float>()[0]));
  EXPECT_TRUE(std::isnan(a.span<float>()[255]));
  a.span<float>()[0] = 7.0f;
  a = Buffer();
  Buffer b = cache->allocate(DType::U8, 1024);  // reused: poisoned again, 0xFF for u8
  EXPECT_EQ(b.span<uint8_t>()[0], 0xFF);
  EXPECT_TRUE(std::isnan(b.span<float>()[0]));  // a float view of u8 storage is NaN too
  set_check_mode(before);
}

TEST(BlockCache, AFreedBlockServesTheNextAllocationOfItsByteSize) {
  auto cache = cache_of(16);
  Buffer a = cache->allocate(DType::F32, 256);
  void* first = a.data();
  a.span<float>()[0] = 7.0f;
  a = Buffer();
  EXPECT_EQ(cache->cached_bytes(), 1024u);
  Buffer b = cache->allocate(DType::U8, 1024);  // same bytes, any dtype
  EXPECT_EQ(b.data(), first);
  EXPECT_EQ(b.span<float>()[0], 7.0f);  // not cleared
  EXPECT_EQ(cache->cached_bytes(), 0u);
  Buffer c = cache->allocate(DType::F32, 256);  // taken: a new block
  EXPECT_NE(c.data(), first);
  Buffer other = cache->allocate(DType::F32, 128);  // another size never takes it
  EXPECT_NE(other.data(), first);
}

TEST(BlockCache, StaysUnderItsLimitGivingBackTheOldestFirst) {
  auto cache = cache_of(1);
  const size_t half = size_t{1} << 19;
  Buffer a = cache->allocate(DType::U8, half);
  Buffer b = cache->allocate(DType::U8, half);
  Buffer c = cache->allocate(DType::U8, half / 2);
  void* b_memory = b.data();
  a = Buffer();  // oldest
  b = Buffer();
  EXPECT_EQ(cache->cached_bytes(), 2 * half);
  c = Buffer();  // does not fit: a goes
  EXPECT_EQ(cache->cached_bytes(), half + half / 2);
  Buffer again = cache->allocate(DType::U8, half);
  EXPECT_EQ(again.data(), b_memory);
  Buffer huge = cache->allocate(DType::U8, 4 * half);  // larger than the limit: freed, never kept
  huge = Buffer();
  EXPECT_EQ(cache->cached_bytes(), half / 2);
  free_cached_blocks();
  EXPECT_EQ(cache->cached_bytes(), 0u);
}

TEST(BlockCache, ZeroTurnsItOffAndBadSizesAreErrors) {
  auto off = cache_of(0);
  off->allocate(DType::F32, 16);
  EXPECT_EQ(off->cached_bytes(), 0u);
  EXPECT_THROW(off->allocate(DType::F32, size_t{1} << 62), Error);
  ::setenv("SVOD_BLOCK_CACHE_MB", "-1", 1);
  EXPECT_THROW(make_block_cache(*cpu_device(), BlockCache::Memory::Device), Error);
  ::unsetenv("SVOD_BLOCK_CACHE_MB");
}

TEST(BlockCache, BuffersFreedFromManyThreadsAreAllKept) {
  auto cache = cache_of(64);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        Buffer b = cache->allocate(DType::F32, 64 + (i % 4));
        b.span<float>()[0] = static_cast<float>(i);
      }
    });
  }
  for (auto& t : threads) t.join();
  // At most 4 blocks of each of the 4 sizes were ever live at once.
  EXPECT_LE(cache->cached_bytes(), 4u * 4u * 67u * 4u);
  EXPECT_GT(cache->cached_bytes(), 0u);
}

// Device::allocate_host_cached: host memory of the kind allocate_host gives
// (what collectives stage device buffers through), reused by byte size apart
// from the device's own blocks, and given back by free_cached().
TEST(BlockCache, HostStagingMemoryHasItsOwnCache) {
  Device& cpu = *cpu_device();
  cpu.free_cached();
  Buffer a = cpu.allocate_host_cached(DType::F32, 4096);
  ASSERT_TRUE(a.is_host());
  void* first = a.data();
  a = Buffer();
  Buffer own = cpu.allocate_cached(DType::F32, 4096);  // the device's cache: not the host block
  EXPECT_NE(own.data(), first);
  Buffer again = cpu.allocate_host_cached(DType::U8, 4 * 4096);
  EXPECT_EQ(again.data(), first);
  again = Buffer();
  cpu.free_cached();
  Buffer fresh = cpu.allocate_host_cached(DType::F32, 4096);
  EXPECT_TRUE(fresh.is_host());
}

TEST(BlockCache, ABufferOutlivingItsCacheFreesItsMemory) {
  Buffer kept;
  {
    auto cache = cache_of(16);
    kept = cache->allocate(DType::F32, 8);
  }
  kept.span<float>()[7] = 1.0f;  // still valid memory; freed when `kept` goes
}

}  // namespace
}  // namespace svod
