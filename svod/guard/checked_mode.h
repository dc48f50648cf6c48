// Checked mode: what svod checks beyond its usual validation while a kernel
// under development is being debugged. Off by default and free when off
// (each check is one load of a global where memory is allocated, a plan
// starts a run or a CPU launch is checked).
//
//   memory  every host buffer made while it is on gets inaccessible guard
//           pages on both sides (svod/guard/guarded_memory.h), so a kernel's
//           first access past either end faults and the fault names the
//           buffer and element; CPU launches run every other argument on a
//           guarded copy and check the canaries after (CpuProgram's
//           launch_staged; plans run op by op through it); reused blocks
//           (Device::allocate_cached) are poisoned, so reads of never-written
//           memory show.
//   nan     a plan runs its ops one at a time in dependency order and, after
//           each, looks for NaN or Inf in the float buffers it writes; the
//           first op whose outputs hold one fails, naming the op, buffer and
//           element.
//
// SVOD_CHECK sets it at start-up: "memory", "nan", "all", or a comma list
// ("memory,nan"), or a switch word (svod/base/env.h): on is memory, off (or
// empty) none. `svod run --check[=WHAT]` and Python's svod.checked() set it
// too.
#pragma once

#include <atomic>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "svod/base/dtype.h"

namespace svod {

struct CheckMode {
  bool memory = false;
  bool nan = false;
  bool any() const noexcept { return memory || nan; }
  bool operator==(const CheckMode&) const = default;
};

// "memory", "nan", "all", "memory,nan", a switch word, "" (what to_string
// gives back parses to the same mode); Error(Validation) naming `what` (e.g.
// "--check") otherwise.
CheckMode parse_check_mode(std::string_view text, std::string_view what);
std::string to_string(CheckMode mode);

// The mode now: SVOD_CHECK (read at the first call; a malformed value is an
// Error(Validation) naming it, at every call until set_check_mode) until
// set_check_mode changes it.
CheckMode check_mode();
// Applies to buffers allocated and plan runs started from now on.
void set_check_mode(CheckMode mode) noexcept;

namespace detail {
extern std::atomic<int> check_mode_bits;  // -1 until SVOD_CHECK was read; else bit 0 memory, bit 1 nan
}  // namespace detail

// check_mode().memory in one load, for launches; false until the first
// check_mode() call read SVOD_CHECK (every CpuProgram's construction makes one).
inline bool memory_checked() noexcept {
  const int bits = detail::check_mode_bits.load(std::memory_order_relaxed);
  return bits > 0 && (bits & 1) != 0;
}

// What checked mode writes into memory nobody has written yet: a signalling
// NaN of each float type, 0xFF bytes for u8 (untyped storage, so that any
// float view of it is NaN too), 0xA5 bytes for the other integer types.
void poison(void* data, size_t bytes, DType dtype) noexcept;

// The first of `count` elements of float type `dtype` at `data` that is NaN
// or infinite; nullopt when all are finite or the type is not a float type.
std::optional<size_t> first_non_finite(const void* data, size_t count, DType dtype) noexcept;

}  // namespace svod
