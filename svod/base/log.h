// Diagnostics. The library never prints on its own: output appears only when
// SVOD_DEBUG is set (level 1 compiles, 2 launches, 3 sources, 4 disassembly),
// and goes to stderr through spdlog.
#pragma once

#include <spdlog/spdlog.h>

namespace svod {

// SVOD_DEBUG, read once per process (0 when unset).
int debug_level() noexcept;

// The runtime's logger ("svod", stderr).
spdlog::logger& logger();

}  // namespace svod
