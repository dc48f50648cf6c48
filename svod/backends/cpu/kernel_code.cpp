// register_kernel_code: the names of loaded programs' machine code, for the
// fault handler's report of a fault on a thread that runs no launch.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>

#include "svod/backends/cpu/kernel_fault.h"

namespace svod {
namespace {

// register_kernel_code's table, read by the handler without a lock: a slot
// is claimed (1) and filled before it is published (2), and emptied (1, then
// 0) before it is reused. A program's code has few ranges (its sections or
// segments); more than kRanges are left out.
struct CodeSlot {
  static constexpr size_t kRanges = 4;
  std::atomic<int> state{0};  // 0: free, 1: being filled or emptied, 2: in use
  size_t ranges = 0;
  uintptr_t begin[kRanges] = {};
  uintptr_t size[kRanges] = {};
  char name[128] = {};
};
CodeSlot code_slots[kMaxRegisteredPrograms];

struct CodeRegistration {
  std::shared_ptr<const void> owner;
  CodeSlot* slot = nullptr;
  ~CodeRegistration() {
    if (slot == nullptr) return;
    slot->state.store(1);
    slot->state.store(0, std::memory_order_release);
  }
};

}  // namespace

std::shared_ptr<const void> register_kernel_code(std::shared_ptr<const void> owner,
                                                 std::span<const std::span<const std::byte>> code,
                                                 std::string_view name) {
  auto registration = std::make_shared<CodeRegistration>();
  registration->owner = std::move(owner);
  for (CodeSlot& slot : code_slots) {
    int free = 0;  // read first: a slot in use costs a load, not a locked exchange
    if (slot.state.load(std::memory_order_relaxed) != 0 || !slot.state.compare_exchange_strong(free, 1)) continue;
    slot.ranges = std::min(code.size(), CodeSlot::kRanges);
    for (size_t i = 0; i < slot.ranges; ++i) {
      slot.begin[i] = reinterpret_cast<uintptr_t>(code[i].data());
      slot.size[i] = code[i].size();
    }
    const size_t n = std::min(name.size(), sizeof slot.name - 1);
    std::memcpy(slot.name, name.data(), n);
    slot.name[n] = '\0';
    slot.state.store(2, std::memory_order_release);
    registration->slot = &slot;
    break;
  }
  return registration;
}

namespace detail {

const char* registered_program_at(uintptr_t pc) noexcept {
  for (const CodeSlot& slot : code_slots) {
    if (slot.state.load(std::memory_order_acquire) != 2) continue;
    for (size_t i = 0; i < slot.ranges; ++i)
      if (pc - slot.begin[i] < slot.size[i]) return slot.name;
  }
  return nullptr;
}

}  // namespace detail
}  // namespace svod
