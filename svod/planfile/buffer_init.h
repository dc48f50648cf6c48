// A plan file's buffer filled as its "init" says (zeros, fill, arange,
// uniform and normal from a seed, an .npy file), for plan_load.
#pragma once

#include "svod/device/buffer.h"
#include "svod/planfile/plan_file.h"

namespace svod {

// Fills `buffer` (any device's; device memory through a host staging buffer)
// as desc.init says. Errors say what is wrong with the init (an .npy file's
// dtype or count); the caller says where.
void initialise_buffer(const PlanFileBuffer& desc, const Buffer& buffer);

}  // namespace svod
