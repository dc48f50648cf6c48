// What the machine can give this process.
#pragma once

#include <cstdint>

namespace svod {

// The most memory the machine can give to one host buffer: physical RAM plus
// swap, lowered to this process's cgroup memory limit when it has one. Read
// once per process; UINT64_MAX when the system does not say.
uint64_t host_memory_limit() noexcept;

}  // namespace svod
