// Ahead-of-time packages (docs/PACKAGE_FORMAT.md): a plan file with
// everything it needs in one file — the plan (program sources inline), every
// CPU program's compiled object, the buffers' npy initial data and the
// expected outputs — so that a machine can run it without reading other
// files or compiling anything.
//
// Packing loads the plan once (compiling through the object cache) and keeps
// what the compiler produced. Loading parses the embedded plan and builds it
// with load_plan(), whose hooks take buffers, expected values and programs
// from the package:
//  - CPU objects load with svod's ELF loader straight from the package bytes
//    when they suit this machine (architecture, svod's object ABI, and every
//    CPU feature they were compiled for; see cpu_features.h). When they do
//    not, the program is compiled from its embedded source if compiling is
//    allowed (noted at SVOD_DEBUG=1), else refused with Error(Unsupported)
//    naming the missing features.
//  - OpenCL programs travel as the device's binary (keyed by the OpenCL
//    compiler identity: platform, device, OpenCL and driver versions) and as
//    source. The binary loads when the identity is that of this machine's
//    device and the driver takes it; otherwise the source is built when
//    compiling is allowed (noted at SVOD_DEBUG=1), else the program is refused
//    with Error(Unsupported) naming it and the mismatch. Programs for other
//    devices (CUDA) are kept as source and compiled when the package loads.
//  - A signed package (signature.h, `svod pack --sign`) is checked before
//    anything in it is used; SVOD_TRUSTED_KEYS makes a trusted signature a
//    condition of loading (docs/SECURITY.md).
//  - A package loaded from a path is read once into private memory, and its
//    signature and contents are checked and used there, never in the file
//    again (a rewrite or truncation after loading changes nothing). CPU
//    buffers with npy data use that memory where it lies (64-byte aligned),
//    except in checked mode, which copies them into guarded memory; from
//    memory, the data is copied, so the caller's bytes are only read during
//    the call.
#pragma once

#include <atomic>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "svod/package/package_format.h"
#include "svod/package/signature.h"
#include "svod/planfile/plan_file.h"
#include "svod/planfile/plan_save.h"

namespace svod {

struct PackOptions {
  // Variable values (svod pack --var) that become the package's defaults.
  std::map<std::string, int64_t> vars;
  // The ranks the plan is loaded on while packing (LoadOptions::communicator;
  // null: one rank), for a plan whose collectives fit some numbers of ranks
  // and not one. The other ranks load the same plan with it (pack_plan or
  // load_plan); what is packed does not depend on the rank or their number.
  std::shared_ptr<Communicator> communicator = {};
  // The compiler of the plan's CPU programs (LoadOptions::cpu_compiler;
  // empty: the process's default).
  std::string cpu_compiler;
  // What made the plan, recorded in the manifest ("svod.tinygrad"); free text.
  std::string exporter;
  // The manifest's "plan" of a plan in memory (a plan file's is its path).
  std::string plan_name;
  // The CPU the packed CPU objects are for. Empty: the objects the plan's
  // programs were loaded from, made for this machine (-march=native). A CPU
  // or family as clang's -march names it ("x86-64-v3", "x86-64-v2",
  // "znver4"): every CPU program that has an object is compiled again for
  // it by a clang process (cpu_compiler_for_target), and the manifest's
  // "cpu" records that CPU and the features its objects may use, which a
  // loading machine checks. Error(Validation) for a name clang does not know.
  std::string target_cpu;
  // No compiled program at all: every program travels as its source and is
  // compiled when the package loads (through the object cache there), on
  // whatever CPU and device that is.
  bool sources_only = false;
  // Called with a plan file's plan once it is loaded, before it is packed
  // (svod pack --variants chooses its variants there: svod/tune/variants.h).
  // A program it replaces in an op (ExecutionPlan::replace_program) is
  // packed in its place, its recipe in the packaged plan.
  std::function<void(ExecutionPlan&)> prepare;
};

// The package for a plan file, in memory. Plan errors keep their kind and
// message (as load_plan reports them).
std::vector<std::byte> pack_plan(const std::filesystem::path& plan, const PackOptions& options = {});
// The package of a plan in memory, however it was made (a plan file,
// PlanBuilder, a capture): the plan file to_plan_file makes of it (`save`
// names its inputs and outputs and may choose roles), the object each of its
// programs was loaded from (Program::artifact: nothing is compiled; a
// program without one is packed as source and compiled when the package
// loads), and the contents of its constant and state buffers as they are
// now. options.vars set variables' values in the packaged plan;
// options.communicator and cpu_compiler are not used (the plan is loaded
// already). Errors as to_plan_file, and Error(Validation) for a variable
// the plan lacks or a value outside its bounds.
std::vector<std::byte> pack_plan(const ExecutionPlan& plan, const SaveOptions& save, const PackOptions& options = {});
// Writes a package's bytes to `out` through a temporary file renamed into
// place, so no reader sees half a package. Error(Io) on failure.
void write_package(const std::filesystem::path& out, std::span<const std::byte> bytes);

// What loading does with packaged CPU objects that this CPU cannot run
// (they need features it lacks, or are for another architecture or object
// ABI).
enum class CpuMismatch {
  // Compile the programs from the package's sources (the default; it needs
  // a compiler, and SVOD_COMPILE=0 refuses as below).
  Recompile,
  // Refuse the package: Error(Unsupported) naming the program and what the
  // objects need that this CPU lacks, and nothing is compiled.
  Refuse,
};

// "recompile" or "refuse"; Error(Validation) naming both for anything else.
CpuMismatch parse_cpu_mismatch(std::string_view name);

// Builds `spec` from its source for `device`.
using CompileSource = std::function<std::shared_ptr<const Program>(Device& device, const ProgramSpec& spec)>;

struct PackageLoadOptions {
  // Overrides of variable values, on top of the values the package was made with.
  std::map<std::string, int64_t> vars;
  // The ranks the plan runs on (LoadOptions::communicator); null: one rank.
  std::shared_ptr<Communicator> communicator = {};
  // Buffers whose first values come from .npy files instead of the package's
  // data (LoadOptions::inputs).
  std::map<std::string, std::filesystem::path> inputs;
  // The compiler of the CPU devices, for the programs the package holds no
  // object for that this machine runs (LoadOptions::cpu_compiler; empty: the
  // process's default).
  std::string cpu_compiler;
  // CPU objects this CPU cannot run: compiled from source, or refused.
  CpuMismatch on_cpu_mismatch = CpuMismatch::Recompile;
  // How a program is compiled from its packaged source (a package that holds
  // no object for it, or one this device cannot run); empty:
  // device.compile(spec). A sandboxed load passes the sandbox's confined
  // compile (svod/sandbox/confined_compile.h), so it compiles nothing in
  // this process.
  CompileSource compile_source = {};
};

struct LoadedPackage {
  PackageManifest manifest;
  PlanFile file;       // the packaged plan (its npy names are kept for reference only)
  LoadedPlan loaded;   // ready to execute
  size_t compiled = 0;  // programs compiled while loading (foreign objects or binaries, CUDA source)
  std::optional<PublicKey> signer;  // whose signature the package carries (checked); nullopt: unsigned
};

// Errors: Io when the file cannot be read or is not a regular file (a FIFO, a
// device or a folder is refused, never waited on); Validation or Load (see
// package_format.h) for a damaged package; Validation for a signature that
// does not hold, or one SVOD_TRUSTED_KEYS does not trust (signature.h);
// Unsupported for objects this machine cannot run while compiling is off or
// options.on_cpu_mismatch refuses; plan errors as load_plan's.
LoadedPackage load_package(const std::filesystem::path& path, const PackageLoadOptions& options = {});
LoadedPackage load_package(std::span<const std::byte> bytes, const PackageLoadOptions& options = {});

// One program that `reader`'s manifest lists by `name`, on `device` as `spec`:
// its packaged artifact, loaded when it suits this device (by the compiler
// identity the manifest records for it: Device::artifact_mismatch, and a
// load that succeeds); otherwise `spec` compiled from its source where
// compiling is allowed (and, for CPU objects, `on_cpu_mismatch` says to
// recompile), else Error(Unsupported) naming why the artifact cannot run.
// `compiled` counts the programs compiled; `compile_source` compiles them
// (empty: device.compile).
std::shared_ptr<const Program> load_packaged_program(const PackageReader& reader, const PackageManifest& manifest,
                                                     const std::string& name, Device& device, const ProgramSpec& spec,
                                                     std::atomic<size_t>& compiled,
                                                     CpuMismatch on_cpu_mismatch = CpuMismatch::Recompile,
                                                     const CompileSource& compile_source = {});

// True when `path` is a regular file that starts with the package magic (svod
// run takes either). Never waits on a FIFO.
bool is_package_file(const std::filesystem::path& path);

}  // namespace svod
