// Guarded host memory, for checked mode (checked_mode.h). Each allocation is
// its own mapping: an inaccessible guard, the data, an inaccessible guard,
// each guard as large as the data's pages (one page at least), so an access
// up to the data's own size past either end faults, not only the first one
// (inaccessible address space is reserved, not memory). The data ends where
// the trailing guard starts (up to 15 bytes before it when its size is not a
// multiple of 16, the alignment kept for vector loads), so the first access
// past the end faults; an access before the start faults once it leaves the
// data's first page. The bytes between the guards and the data (the gaps)
// hold a canary, so a write into them is found afterwards (gaps_intact). Every
// live allocation is listed in a fixed table the fault handler can read, so
// the report names the allocation a faulting address belongs to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace svod {

// `bytes` of zeroed guarded memory; Error(Execution) when the mapping fails.
void* allocate_guarded(size_t bytes);
// Unmaps what allocate_guarded(bytes) returned.
void free_guarded(void* data, size_t bytes) noexcept;

// False when something wrote into the gaps around the data.
bool gaps_intact(const void* data, size_t bytes) noexcept;
// Where the first changed gap byte lies relative to the data's first byte
// (negative: before it; `bytes` or more: after its end); nullopt when intact.
std::optional<int64_t> first_gap_change(const void* data, size_t bytes) noexcept;

// The live guarded allocation whose guards (or gaps) hold `address`:
// async-signal-safe, for the fault handler.
struct GuardHit {
  uint64_t data;   // the allocation's first byte
  uint64_t bytes;  // its size
  bool after;      // the address is past the end (else before the start)
};
bool find_guard(uint64_t address, GuardHit& hit) noexcept;

}  // namespace svod
