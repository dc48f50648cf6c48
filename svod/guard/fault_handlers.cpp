#include "svod/guard/fault_handlers.h"

namespace svod {

namespace detail {
std::atomic<uint32_t> fault_handlers_epoch_value{1};
}  // namespace detail

void note_fault_handlers_changed() noexcept { detail::fault_handlers_epoch_value.fetch_add(1, std::memory_order_release); }

}  // namespace svod
