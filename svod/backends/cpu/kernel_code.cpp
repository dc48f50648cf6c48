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
  std::atomic<uint64_t> generation{0};  // counts the slot's fillings, so a tag names one program
  size_t ranges = 0;
  uintptr_t begin[kRanges] = {};
  uintptr_t size[kRanges] = {};
  char name[128] = {};
};
CodeSlot code_slots[kMaxRegisteredPrograms];

// A program's tag: its slot's index plus one in the low 16 bits, the slot's
// generation above (0: no slot).
constexpr uint64_t kSlotBits = 16;
static_assert(kMaxRegisteredPrograms < (uint64_t{1} << kSlotBits));

struct CodeRegistration {
  std::shared_ptr<const void> owner;
  CodeSlot* slot = nullptr;
  uint64_t tag = 0;
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
    const uint64_t generation = slot.generation.fetch_add(1, std::memory_order_relaxed) + 1;
    slot.state.store(2, std::memory_order_release);
    registration->slot = &slot;
    registration->tag = generation << kSlotBits | static_cast<uint64_t>(&slot - code_slots + 1);
    break;
  }
  return registration;
}

uint64_t registered_code_tag(const std::shared_ptr<const void>& registration) noexcept {
  return static_cast<const CodeRegistration*>(registration.get())->tag;
}

namespace detail {

std::atomic<uint64_t> last_launched_tag{0};

const char* last_launched_program() noexcept {
  const uint64_t tag = last_launched_tag.load(std::memory_order_relaxed);
  const uint64_t index = tag & ((uint64_t{1} << kSlotBits) - 1);
  if (index == 0) return nullptr;
  const CodeSlot& slot = code_slots[index - 1];
  // Unless the program is gone and its slot was emptied or filled again.
  if (slot.state.load(std::memory_order_acquire) != 2 ||
      slot.generation.load(std::memory_order_relaxed) != tag >> kSlotBits)
    return nullptr;
  return slot.name;
}

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
