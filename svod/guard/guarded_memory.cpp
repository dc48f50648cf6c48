#include "svod/guard/guarded_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "svod/base/error.h"

namespace svod {
namespace {

constexpr unsigned char kCanary = 0xCB;
constexpr size_t kMinAlignment = 16;

size_t page_size() noexcept {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

// Where an allocation of `bytes` lies in its mapping: a guard, the data's
// pages, a guard. Each guard is as large as the data's pages (one page at
// least): inaccessible address space costs no memory, and a kernel that
// jumps over a page (a row or a tile past the end) still lands in it.
struct Layout {
  size_t data_pages;  // bytes between the two guards
  size_t span;        // the data rounded up to its alignment
  size_t guard;       // bytes of each guard
  size_t mapping() const { return data_pages + 2 * guard; }
};

Layout layout(size_t bytes) {
  // The largest power of two up to 64 that divides the size, and at least 16:
  // sizes that are multiples of 16 end exactly at the guard.
  size_t align = 64;
  while (align > kMinAlignment && bytes % align != 0) align /= 2;
  const size_t span = (bytes + align - 1) / align * align;
  const size_t page = page_size();
  const size_t data_pages = (span + page - 1) / page * page;
  return {data_pages, span, std::max(data_pages, page)};
}

// The mapping's first byte, for data laid out as `l`.
std::byte* mapping_of(const void* data, const Layout& l) {
  return static_cast<std::byte*>(const_cast<void*>(data)) + l.span - l.data_pages - l.guard;
}

// The live allocations, for the fault handler: slots are claimed with a
// compare-and-swap of `data` and freed by storing 0, so the handler can read
// them without a lock. When the table is full an allocation is still
// guarded, only not named in reports.
struct Region {
  std::atomic<uint64_t> data{0};
  std::atomic<uint64_t> bytes{0};
};
constexpr size_t kRegions = size_t{1} << 16;
Region regions[kRegions];
std::atomic<size_t> next_region{0};

void remember(uint64_t data, uint64_t bytes) {
  const size_t start = next_region.fetch_add(1, std::memory_order_relaxed);
  for (size_t n = 0; n < kRegions; ++n) {
    Region& r = regions[(start + n) % kRegions];
    uint64_t empty = 0;
    if (r.data.load(std::memory_order_relaxed) != 0) continue;
    if (!r.data.compare_exchange_strong(empty, data, std::memory_order_relaxed)) continue;
    r.bytes.store(bytes, std::memory_order_release);  // a report reading it a moment early sees the old size
    return;
  }
}

void forget(uint64_t data) {
  for (Region& r : regions) {
    uint64_t expected = data;
    // A plain load first: a locked exchange on every slot would cost a free about a millisecond.
    if (r.data.load(std::memory_order_relaxed) == data &&
        r.data.compare_exchange_strong(expected, 0, std::memory_order_relaxed))
      return;
  }
}

}  // namespace

void* allocate_guarded(size_t bytes) {
  const Layout l = layout(bytes);
  // All of it inaccessible and unreserved, then the data's pages opened: only
  // they count against the host's memory.
  void* mapped =
      ::mmap(nullptr, l.mapping(), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapped == MAP_FAILED)
    throw make_error(ErrorKind::Execution, "out of address space mapping {} bytes of guarded memory (checked mode): {}",
                     l.mapping(), std::strerror(errno));
  auto* base = static_cast<std::byte*>(mapped);
  if (l.data_pages != 0 && ::mprotect(base + l.guard, l.data_pages, PROT_READ | PROT_WRITE) != 0) {
    const int error = errno;
    ::munmap(mapped, l.mapping());
    throw make_error(ErrorKind::Execution, "out of host memory for {} bytes of a checked-mode buffer: {}", bytes,
                     std::strerror(error));
  }
  std::byte* data = base + l.guard + l.data_pages - l.span;
  std::memset(base + l.guard, kCanary, l.data_pages - l.span);  // the gap before the data
  std::memset(data + bytes, kCanary, l.span - bytes);           // and after it
  remember(reinterpret_cast<uint64_t>(data), bytes);
  return data;
}

void free_guarded(void* data, size_t bytes) noexcept {
  forget(reinterpret_cast<uint64_t>(data));
  const Layout l = layout(bytes);
  ::munmap(mapping_of(data, l), l.mapping());
}

std::optional<int64_t> first_gap_change(const void* data, size_t bytes) noexcept {
  const Layout l = layout(bytes);
  const auto* p = static_cast<const unsigned char*>(data);
  const auto* first = reinterpret_cast<const unsigned char*>(mapping_of(data, l)) + l.guard;
  // Nearest the data first: from the byte just before it down, then from the one just after it up.
  for (const unsigned char* c = p; c-- > first;)
    if (*c != kCanary) return c - p;
  for (const unsigned char* c = p + bytes; c < p + l.span; ++c)
    if (*c != kCanary) return c - p;
  return std::nullopt;
}

bool gaps_intact(const void* data, size_t bytes) noexcept { return !first_gap_change(data, bytes); }

bool find_guard(uint64_t address, GuardHit& hit) noexcept {
  for (const Region& r : regions) {
    const uint64_t data = r.data.load(std::memory_order_relaxed);
    if (data == 0) continue;
    const uint64_t bytes = r.bytes.load(std::memory_order_acquire);
    const Layout l = layout(bytes);
    const auto base = reinterpret_cast<uint64_t>(mapping_of(reinterpret_cast<const void*>(data), l));
    if (address < base || address >= base + l.mapping()) continue;
    if (address >= data && address < data + bytes) continue;  // the data itself (a fault of another cause)
    hit = {data, bytes, address >= data + bytes};
    return true;
  }
  return false;
}

}  // namespace svod
