// Compiler: turns a ProgramSpec's source into an Artifact for one target.
// CompilerIdentity says exactly which toolchain, target and flags produced an
// artifact; it is part of every cache key, so a toolchain, flag or CPU change
// never returns a stale object.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <span>
#include <string_view>
#include <string>
#include <vector>

#include "svod/base/hash.h"
#include "svod/base/short_name.h"
#include "svod/compile/cpu_recipe.h"
#include "svod/program/program_spec.h"

namespace svod {

struct CompilerIdentity {
  std::string name;     // "clang", "llvm", "nvrtc", ...
  std::string path;     // the tool or library used
  std::string version;
  std::string target_triple;
  std::string target_cpu;
  std::vector<std::string> target_features;  // "+avx2", "-avx512f", ...
  std::vector<std::string> flags;
  uint32_t abi_version = 1;  // bumped when svod's object handling changes

  Hash128 hash() const;
  std::string describe() const;  // one line for logs and `svod info`
};

// An identity_source() for a compiler that is one file targeting the host
// CPU: the file's path, device, inode, size and modification time (following
// links), `inputs` (flags and the like) and the host CPU's signature; nullopt
// when the file cannot be stat()ed or the host CPU is not known.
std::optional<Hash128> host_tool_identity_source(std::string_view kind, const std::string& path,
                                                 std::initializer_list<std::span<const std::string>> inputs);

// What an Artifact's bytes are, by the name object cache entries and
// packages record ("elf_object", "cubin"). The CPU compilers' kinds are here;
// a device whose compiler makes binaries of its own declares their kind in
// its folder (the CUDA device's "ptx" and "cubin"). A Preamble is no
// program's artifact: the in-process C compiler keeps the precompiled header
// of a source's leading #include lines in the object cache for later
// processes.
class ArtifactKind : public ShortName<ArtifactKind> {
 public:
  constexpr explicit ArtifactKind(std::string_view name) : ShortName(name, "artifact kind") {}
  static const ArtifactKind ElfObject;      // "elf_object": a relocatable object for svod's loader
  static const ArtifactKind SharedLibrary;  // "shared_library": for dlopen
  static const ArtifactKind Preamble;       // "preamble"
};
inline constexpr ArtifactKind ArtifactKind::ElfObject{"elf_object"};
inline constexpr ArtifactKind ArtifactKind::SharedLibrary{"shared_library"};
inline constexpr ArtifactKind ArtifactKind::Preamble{"preamble"};
// True for the kinds the CPU compilers make, which run on the host CPU.
constexpr bool is_cpu_artifact(const ArtifactKind& kind) noexcept {
  return kind == ArtifactKind::ElfObject || kind == ArtifactKind::SharedLibrary;
}

// Where one compile's time went (CPU time of the compiling thread), for
// benchmarks and SVOD_DEBUG logs. Zero for the phases a compiler does not
// measure (a clang process is one opaque step).
struct CompilePhases {
  double front_end_ms = 0;  // parsing and IR generation
  double optimise_ms = 0;   // the IR pass pipeline
  double codegen_ms = 0;    // instruction selection to object bytes
};

struct Artifact {
  ArtifactKind kind = ArtifactKind::ElfObject;
  std::vector<std::byte> bytes;
  // Neither is part of the artifact's content or cache entry: where the
  // compile's time went, and what the compiler said about a source it
  // compiled (warnings; empty when it said nothing), for `svod compile`.
  CompilePhases phases;
  std::string diagnostics;
};

class Compiler {
 public:
  virtual ~Compiler();
  virtual const CompilerIdentity& identity() const = 0;
  // Thread-safe. Throws Error(Compile) with the diagnostics on bad source.
  virtual Artifact compile(const ProgramSpec& spec) const = 0;
  // A hash of everything identity() is decided by, found without creating
  // the compiler (for the in-process LLVM: its library file and the host
  // CPU), so that an identity known from an earlier process can stand in for
  // it and a warm run never opens the compiler (the object cache remembers
  // them). nullopt when there is no such shortcut.
  virtual std::optional<Hash128> identity_source() const { return std::nullopt; }
  // The recipes a spec may name (ProgramSpec::recipe), its default first:
  // the CPU compilers' (cpu_recipe.h); none for a compiler that has only its
  // default. Opens and starts nothing.
  virtual std::span<const CpuRecipe> recipes() const { return {}; }
  // Throws unless this compiler follows the recipe `spec` names (any
  // compiler follows its default, an empty name): Error(Unsupported) for a
  // compiler without recipes, Error(Validation) listing its recipes for a
  // name it does not have.
  void check_recipe(const ProgramSpec& spec) const;
};

}  // namespace svod
