// Program binaries: one compiled program as bytes that carry what made them,
// for a cache that is not svod's own (tinygrad's disk cache keeps the kernels
// svod compiles for it this way; svod.tinygrad).
//
// A program binary is a package (package_format.h) without a plan: its
// manifest lists the one program (by its entry), the artifact's kind and the
// identity of the compiler that made it; a "source" section holds the source
// and "compiled_from" the hash of what reached the compiler (source,
// language, entry, defines: cache_key.h's source_hash). Every digest is
// checked before anything is used. Loading takes the caller's spec for the
// parameters and launch sizes, which the artifact does not depend on; it
// must name the source, language, entry and defines the binary was compiled
// from. Where the artifact cannot run on this machine (another CPU, another
// driver), the source is compiled instead, as for a package's programs.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "svod/device/device.h"
#include "svod/program/program_spec.h"

namespace svod {

// Compiles `spec` for `device` (through the object cache: a stored object is
// not compiled again) into a program binary. Compile, Validation and
// Unsupported errors as Device::compile throws them.
std::vector<std::byte> compile_program_binary(Device& device, const ProgramSpec& spec);

// The source a program binary holds. Error(Validation) for bytes that are
// not a program binary (a plan's package included), Error(Load) for a
// truncated or corrupt one.
std::string program_binary_source(std::span<const std::byte> binary);

// `spec` on `device` from a program binary, without compiling where its
// artifact suits the device. `spec.source` left empty is the binary's.
// Error(Validation) when the binary was compiled from another source,
// language, entry or defines than `spec` has; the binary's errors as
// program_binary_source's.
std::shared_ptr<const Program> load_program_binary(Device& device, ProgramSpec spec,
                                                   std::span<const std::byte> binary);

}  // namespace svod
