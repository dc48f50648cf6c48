#include "svod/guard/kernels_in_flight.h"

#include <algorithm>
#include <atomic>
#include <cstring>

namespace svod {
namespace {

// Read by the handler without a lock: a slot is claimed (1) and filled before
// it is published (2), and emptied by storing 0. A report that races with a
// slot's reuse may print a mixed note; it is never read past its end.
struct Slot {
  std::atomic<int> state{0};  // 0: free, 1: being filled, 2: in flight
  char note[192] = {};
};
constexpr size_t kSlots = 256;
Slot slots[kSlots];

}  // namespace

int note_kernel_in_flight(std::string_view note) noexcept {
  for (size_t i = 0; i < kSlots; ++i) {
    Slot& slot = slots[i];
    int free = 0;  // read first: a slot in use costs a load, not a locked exchange
    if (slot.state.load(std::memory_order_relaxed) != 0 || !slot.state.compare_exchange_strong(free, 1)) continue;
    const size_t n = std::min(note.size(), sizeof slot.note - 1);
    std::memcpy(slot.note, note.data(), n);
    slot.note[n] = '\0';
    slot.state.store(2, std::memory_order_release);
    return static_cast<int>(i);
  }
  return -1;
}

void forget_kernel_in_flight(int slot) noexcept {
  if (slot >= 0) slots[static_cast<size_t>(slot)].state.store(0, std::memory_order_release);
}

size_t for_each_kernel_in_flight(void (*each)(const char* note, void* context), void* context) noexcept {
  size_t count = 0;
  for (const Slot& slot : slots) {
    if (slot.state.load(std::memory_order_acquire) != 2) continue;
    if (each != nullptr) each(slot.note, context);
    ++count;
  }
  return count;
}

}  // namespace svod
