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
#include <string_view>
#include <vector>

#include "svod/device/device.h"
#include "svod/package/package_format.h"
#include "svod/program/program_spec.h"

namespace svod {

// Compiles `spec` for `device` (through the object cache: a stored object is
// not compiled again) into a program binary. Compile, Validation and
// Unsupported errors as Device::compile throws them.
std::vector<std::byte> compile_program_binary(Device& device, const ProgramSpec& spec);

// Eight hex digits that change whenever binaries this svod makes would be
// refused by one that differs (the package format, or what compiled_from
// covers and how it is hashed): a cache of binaries keyed by it misses
// instead of handing out binaries this svod refuses (svod.tinygrad's key).
std::string program_binary_format();

// A program binary's bytes, checked once (every digest, the manifest and its
// one program) for reading its source and loading it. Error(Validation) for
// bytes that are not a program binary (a plan's package included),
// Error(Load) for a truncated or corrupt one. The bytes must outlive it.
class ProgramBinary {
 public:
  explicit ProgramBinary(std::span<const std::byte> bytes);

  std::string_view source() const;

  // `spec` on `device`, without compiling where the artifact suits the
  // device. `spec.source` left empty is the binary's. Error(Validation) when
  // the binary was compiled from another source, language, entry or defines
  // than `spec` has.
  std::shared_ptr<const Program> load(Device& device, ProgramSpec spec) const;

 private:
  PackageReader reader_;
  PackageManifest manifest_;
};

}  // namespace svod
