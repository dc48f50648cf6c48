// Guarded host memory: each allocation is its own mapping, its data ending
// where an inaccessible guard starts, so a kernel's first access past the end
// faults into the trap (svod/backends/cpu) instead of corrupting what lies
// after it. Two layouts:
//
//   Around  checked mode (checked_mode.h): a guard, the data, a guard, each
//           guard as large as the data's pages (one page at least), so an
//           access up to the data's own size past either end faults, not
//           only the first one (inaccessible address space is reserved, not
//           memory). The data ends at most 15 bytes before the trailing guard
//           (16-byte alignment, kept for vector loads); an access before the
//           start faults once it leaves the data's first page.
//   After   every host buffer by default (fence_host_memory): the data's
//           pages and one guard page after them, the data 64-byte aligned
//           (HostStorage's promise) and ending at most 63 bytes before the
//           guard. Two mappings the kernel counts (vm.max_map_count) where
//           Around takes three.
//
// The bytes between the guards and the data (the gaps: the alignment slack;
// for After, only the slack after the data) hold a canary, so a write into
// them is found afterwards (gaps_intact).
// Every live allocation is listed in a fixed table the fault handler can
// read, so the report names the allocation a faulting address belongs to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace svod {

enum class Guards : uint8_t { Around, After };

// `bytes` of zeroed guarded memory; Error(Execution) when the mapping fails.
void* allocate_guarded(size_t bytes, Guards guards);
// Unmaps what allocate_guarded(bytes, guards) returned.
void free_guarded(void* data, size_t bytes, Guards guards) noexcept;

// allocate_guarded(bytes, Guards::After) while host memory is fenced and the
// process has few enough fenced allocations alive that their mappings stay
// well inside vm.max_map_count (a quarter of it); nullptr otherwise, or when
// the mapping fails, and the caller allocates unfenced memory instead.
void* try_allocate_fenced(size_t bytes) noexcept;
// Whether host buffers are fenced: SVOD_GUARD_PAGES (a switch, on unless set
// off; read at the first call) until set_fence_host_memory changes it.
// Applies to buffers allocated from then on.
bool fence_host_memory();
void set_fence_host_memory(bool on) noexcept;

// False when something wrote into the gaps around the data.
bool gaps_intact(const void* data, size_t bytes, Guards guards) noexcept;
// Where the first changed gap byte lies relative to the data's first byte
// (negative: before it; `bytes` or more: after its end); nullopt when intact.
std::optional<int64_t> first_gap_change(const void* data, size_t bytes, Guards guards) noexcept;

// The live guarded allocation whose guards (or gaps) hold `address`:
// async-signal-safe, for the fault handler.
struct GuardHit {
  uint64_t data;   // the allocation's first byte
  uint64_t bytes;  // its size
  bool after;      // the address is past the end (else before the start)
  Guards guards;   // its layout
};
bool find_guard(uint64_t address, GuardHit& hit) noexcept;

}  // namespace svod
