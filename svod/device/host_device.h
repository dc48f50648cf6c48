// The host device: host memory and copies, no kernels. It is what the core
// stages bytes through and reads results back into, so that no module needs
// a backend (the CPU device) to reach host memory.
#pragma once

#include "svod/device/device.h"

namespace svod {

// The process's host device ("host"): allocate() gives HostStorage, copy()
// moves bytes between host buffers (memmove), languages() is empty and
// compiler()/load() are Error(Unsupported). Buffers it allocates are host
// buffers like any other: CPU kernels take them, devices copy from them.
Device& host_device();

}  // namespace svod
