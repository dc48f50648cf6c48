#include "svod/backends/cpu/fault_location.h"

#include <signal.h>

namespace svod {

int argument_in(const LaunchView& launch, uint64_t data, uint64_t bytes) noexcept {
  int found = -1;
  for (size_t i = 0; i < launch.buffers.size(); ++i) {
    if (launch.args[i] < data || launch.args[i] > data + bytes) continue;
    if (found < 0 || launch.args[i] == data) found = static_cast<int>(i);
  }
  return found;
}

Place locate(const LaunchView& launch, uint64_t address, uint64_t sp, const GuardHit* guard) noexcept {
  const std::span<const BufferParam> buffers = launch.buffers;
  Place p;
  if (address < 4096) {
    p.kind = Place::Null;
    return p;
  }
  if (below_stack_pointer(address, sp)) {
    p.kind = Place::Stack;
    return p;
  }
  if (guard != nullptr) {
    // In the guard page (or gap) of a guarded allocation: checked mode's or the default fence.
    p.kind = guard->guards == Guards::Around ? Place::Guarded : Place::Fenced;
    p.hit = *guard;
    p.buffer = argument_in(launch, p.hit.data, p.hit.bytes);
    const uint64_t start = p.buffer >= 0 ? launch.args[p.buffer] : p.hit.data;
    const uint64_t end = p.hit.data + p.hit.bytes;
    p.extent = end - start;
    p.offset = p.hit.after ? address - end : start - address;
    if (p.buffer >= 0 && buffers[static_cast<size_t>(p.buffer)].dtype) {
      const uint64_t size = size_of(*buffers[static_cast<size_t>(p.buffer)].dtype);
      p.element_known = true;
      p.element = element_at(static_cast<int64_t>(address - start), size);
    }
    return p;
  }
  size_t nearest = buffers.size();
  for (size_t i = 0; i < buffers.size(); ++i)
    if (launch.args[i] <= address && (nearest == buffers.size() || launch.args[i] > launch.args[nearest])) nearest = i;
  if (nearest == buffers.size()) return p;  // BeforeAll
  p.kind = Place::Past;
  p.buffer = static_cast<int>(nearest);
  p.offset = address - launch.args[nearest];
  if (const auto& dtype = buffers[nearest].dtype) {
    p.element_known = true;
    p.element = static_cast<int64_t>(p.offset / size_of(*dtype));
  }
  return p;
}

std::optional<Place> place_of(const LaunchView& launch, const TrappedFault& f) noexcept {
  if (!address_known(f)) return std::nullopt;
  GuardHit hit;
  return locate(launch, f.address, f.sp, find_guard(f.address, hit) ? &hit : nullptr);
}

std::string_view cause_of(Place::Kind place) noexcept {
  switch (place) {
    case Place::Null: return "null pointer";
    case Place::Stack: return "stack overflow";
    case Place::Guarded: return "out of bounds (checked mode)";
    case Place::Fenced:
    case Place::Past: return "out of bounds";
    case Place::BeforeAll: return "wild address";
  }
  return "wild address";
}

std::string_view cause_without_address(int signal) noexcept {
  switch (signal) {
    case SIGFPE: return "arithmetic fault";
    case SIGILL: return "illegal instruction";
    case SIGTRAP: return "breakpoint";
    case SIGBUS: return "bus error";
    default: return "general protection (a non-canonical pointer or a misaligned vector access)";
  }
}

}  // namespace svod
