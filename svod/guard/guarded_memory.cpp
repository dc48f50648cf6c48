#include "svod/guard/guarded_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "svod/base/env.h"
#include "svod/base/error.h"

namespace svod {
namespace {

constexpr unsigned char kCanary = 0xCB;
constexpr size_t kMinAlignment = 16;
constexpr size_t kFenceAlignment = 64;

size_t page_size() noexcept {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

// Where an allocation of `bytes` lies in its mapping: a guard (Around only),
// the data's pages, a guard. Around's guards are as large as the data's pages
// (one page at least): inaccessible address space costs no memory, and a
// kernel that jumps over a page (a row or a tile past the end) still lands in
// it. After's is one page.
struct Layout {
  size_t data_pages;    // bytes between the two guards
  size_t span;          // the data rounded up to its alignment
  size_t guard_before;  // bytes of the leading guard
  size_t guard_after;   // bytes of the trailing guard
  size_t mapping() const { return guard_before + data_pages + guard_after; }
};

Layout layout(size_t bytes, Guards guards) {
  // Around: the largest power of two up to 64 that divides the size, and at
  // least 16, so sizes that are multiples of 16 end exactly at the guard.
  size_t align = kFenceAlignment;
  if (guards == Guards::Around)
    while (align > kMinAlignment && bytes % align != 0) align /= 2;
  const size_t span = (bytes + align - 1) / align * align;
  const size_t page = page_size();
  const size_t data_pages = (span + page - 1) / page * page;
  if (guards == Guards::After) return {data_pages, span, 0, page};
  const size_t guard = std::max(data_pages, page);
  return {data_pages, span, guard, guard};
}

// The mapping's first byte, for data laid out as `l`.
std::byte* mapping_of(const void* data, const Layout& l) {
  return static_cast<std::byte*>(const_cast<void*>(data)) + l.span - l.data_pages - l.guard_before;
}

// The live allocations, for the fault handler: slots are claimed with a
// compare-and-swap of `data` and freed by storing 0, so the handler can read
// them without a lock. An allocation's search starts at a slot its address
// picks, so a free finds it in a probe or two. When the table is full an
// allocation is still guarded, only not named in reports.
struct Region {
  std::atomic<uint64_t> data{0};
  std::atomic<uint64_t> bytes{0};  // the top bit: Guards::After
};
constexpr size_t kRegions = size_t{1} << 16;
constexpr uint64_t kAfterBit = uint64_t{1} << 63;
Region regions[kRegions];

size_t first_slot(uint64_t data) { return static_cast<size_t>((data >> 6) * 0x9E3779B97F4A7C15ull >> 48) % kRegions; }

void remember(uint64_t data, uint64_t bytes, Guards guards) {
  const size_t start = first_slot(data);
  for (size_t n = 0; n < kRegions; ++n) {
    Region& r = regions[(start + n) % kRegions];
    uint64_t empty = 0;
    if (r.data.load(std::memory_order_relaxed) != 0) continue;
    if (!r.data.compare_exchange_strong(empty, data, std::memory_order_relaxed)) continue;
    // A report reading it a moment early sees the old size.
    r.bytes.store(bytes | (guards == Guards::After ? kAfterBit : 0), std::memory_order_release);
    return;
  }
}

void forget(uint64_t data) {
  const size_t start = first_slot(data);
  for (size_t n = 0; n < kRegions; ++n) {
    Region& r = regions[(start + n) % kRegions];
    uint64_t expected = data;
    // A plain load first: a locked exchange on every slot would cost a free about a millisecond.
    if (r.data.load(std::memory_order_relaxed) == data &&
        r.data.compare_exchange_strong(expected, 0, std::memory_order_relaxed))
      return;
  }
}

// Fenced allocations alive, and how many may be: a quarter of the mappings
// the kernel allows a process, each taking two.
std::atomic<size_t> live_fences{0};

size_t fence_budget() {
  static const size_t budget = [] {
    size_t limit = 65530;  // Linux's default
    if (std::FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r")) {
      unsigned long value = 0;
      if (std::fscanf(f, "%lu", &value) == 1 && value > 0) limit = value;
      std::fclose(f);
    }
    return limit / 8;
  }();
  return budget;
}

// -1 until SVOD_GUARD_PAGES is read, else 0 or 1.
std::atomic<int> fence_setting{-1};

}  // namespace

void* allocate_guarded(size_t bytes, Guards guards) {
  const Layout l = layout(bytes, guards);
  // All of it inaccessible and unreserved, then the data's pages opened: only
  // they count against the host's memory.
  void* mapped =
      ::mmap(nullptr, l.mapping(), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapped == MAP_FAILED)
    throw make_error(ErrorKind::Execution, "out of address space mapping {} bytes of guarded memory: {}", l.mapping(),
                     std::strerror(errno));
  auto* base = static_cast<std::byte*>(mapped);
  if (l.data_pages != 0 && ::mprotect(base + l.guard_before, l.data_pages, PROT_READ | PROT_WRITE) != 0) {
    const int error = errno;
    ::munmap(mapped, l.mapping());
    throw make_error(ErrorKind::Execution, "out of host memory for a guarded buffer of {} bytes: {}", bytes,
                     std::strerror(error));
  }
  std::byte* data = base + l.guard_before + l.data_pages - l.span;
  // The gaps before and after the data hold the canary; After's gap before
  // the data is left alone: it guards nothing there, and writing it would
  // fault in a page that a buffer of whole 64-byte lines never touches.
  if (guards == Guards::Around) std::memset(base + l.guard_before, kCanary, l.data_pages - l.span);
  std::memset(data + bytes, kCanary, l.span - bytes);
  remember(reinterpret_cast<uint64_t>(data), bytes, guards);
  if (guards == Guards::After) live_fences.fetch_add(1, std::memory_order_relaxed);
  return data;
}

void free_guarded(void* data, size_t bytes, Guards guards) noexcept {
  forget(reinterpret_cast<uint64_t>(data));
  const Layout l = layout(bytes, guards);
  ::munmap(mapping_of(data, l), l.mapping());
  if (guards == Guards::After) live_fences.fetch_sub(1, std::memory_order_relaxed);
}

void* try_allocate_fenced(size_t bytes) noexcept {
  if (live_fences.load(std::memory_order_relaxed) >= fence_budget()) return nullptr;
  try {
    return allocate_guarded(bytes, Guards::After);
  } catch (const Error&) {
    return nullptr;
  }
}

bool fence_host_memory() {
  int on = fence_setting.load(std::memory_order_relaxed);
  if (on < 0) [[unlikely]] {
    const int read = env_switch(EnvVar::GuardPages).value_or(true) ? 1 : 0;
    fence_setting.compare_exchange_strong(on, read, std::memory_order_relaxed);  // unless set meanwhile
    on = fence_setting.load(std::memory_order_relaxed);
  }
  return on != 0;
}

void set_fence_host_memory(bool on) noexcept { fence_setting.store(on ? 1 : 0, std::memory_order_relaxed); }

std::optional<int64_t> first_gap_change(const void* data, size_t bytes, Guards guards) noexcept {
  const Layout l = layout(bytes, guards);
  const auto* p = static_cast<const unsigned char*>(data);
  const auto* first = reinterpret_cast<const unsigned char*>(mapping_of(data, l)) + l.guard_before;
  // Nearest the data first: from the byte just before it down, then from the one just after it up.
  if (guards == Guards::Around)
    for (const unsigned char* c = p; c-- > first;)
      if (*c != kCanary) return c - p;
  for (const unsigned char* c = p + bytes; c < p + l.span; ++c)
    if (*c != kCanary) return c - p;
  return std::nullopt;
}

bool gaps_intact(const void* data, size_t bytes, Guards guards) noexcept {
  return !first_gap_change(data, bytes, guards);
}

bool find_guard(uint64_t address, GuardHit& hit) noexcept {
  for (const Region& r : regions) {
    const uint64_t data = r.data.load(std::memory_order_relaxed);
    if (data == 0) continue;
    const uint64_t tagged = r.bytes.load(std::memory_order_acquire);
    const uint64_t bytes = tagged & ~kAfterBit;
    const Guards guards = (tagged & kAfterBit) != 0 ? Guards::After : Guards::Around;
    const Layout l = layout(bytes, guards);
    const auto base = reinterpret_cast<uint64_t>(mapping_of(reinterpret_cast<const void*>(data), l));
    if (address < base || address >= base + l.mapping()) continue;
    if (address >= data && address < data + bytes) continue;  // the data itself (a fault of another cause)
    hit = {data, bytes, address >= data + bytes, guards};
    return true;
  }
  return false;
}

}  // namespace svod
