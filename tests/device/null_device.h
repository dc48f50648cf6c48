// The test-only NULL device (null_device.cpp), registered in every test
// binary of this folder: what its queue was asked to do.
#pragma once

#include <string>

namespace svod {

// What the NULL device's queue did since the last call, one letter each in
// order: 'L' a launch submitted, 'C' a copy submitted, 'W' a wait for one of
// its events.
std::string take_null_queue_log();

}  // namespace svod
