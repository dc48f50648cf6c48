// The test-only NULL device (null_device.cpp), registered in every test
// binary of this folder: its own language and artifact kind, and what its
// queue was asked to do.
#pragma once

#include <string>

#include "svod/compile/compiler.h"

namespace svod {

// NULL's language: C under a name of NULL's own.
inline constexpr Language kNullLanguage{"nullc"};
// What NULL's compiler makes: an ELF object behind an 8-byte magic of NULL's.
inline constexpr ArtifactKind kNullObject{"null_object"};

// What the NULL device's queue did since the last call, one letter each in
// order: 'L' a launch submitted, 'C' a copy submitted, 'W' a wait for one of
// its events.
std::string take_null_queue_log();

}  // namespace svod
