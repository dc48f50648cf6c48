// The svod package container (docs/PACKAGE_FORMAT.md): named sections in one
// file, each 64-byte aligned so that data can be used where it lies in the
// memory the file was read into, behind a header and a section table that carry XXH3-128
// digests of themselves and of every section.
//
// PackageReader checks everything before anything is used: magic, format
// version, sizes, section order and bounds, zero padding and every digest,
// so a truncated file or any flipped byte is refused (a signature block after
// the package is framed here and verified by signature.h). Errors name the
// package and the part at fault: Error(Validation) when the bytes are not a
// package at all (wrong magic), Error(Load) for everything else (truncated,
// corrupt, another format version, a malformed manifest).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "svod/compile/compiler.h"
#include "svod/base/dtype.h"

namespace svod {

inline constexpr char kPackageMagic[8] = {'S', 'V', 'O', 'D', 'P', 'K', 'G', '\0'};
// The format version written; every version from kOldestPackageFormatVersion
// to it is read (version 1 has no inputs, outputs or exporter).
inline constexpr uint32_t kPackageFormatVersion = 2;
inline constexpr uint32_t kOldestPackageFormatVersion = 1;
inline constexpr size_t kPackageAlignment = 64;
inline constexpr size_t kPackageSectionNameMax = 95;  // bytes; the table keeps a terminating NUL

struct PackageSection {
  std::string name;
  size_t offset = 0;                 // from the start of the package, a multiple of kPackageAlignment
  std::span<const std::byte> bytes;  // inside the bytes the reader was given
};

// Builds a package in memory. Sections keep the order they were added in.
class PackageWriter {
 public:
  // Error(Validation) for an empty, too long or repeated name.
  void add(std::string name, std::vector<std::byte> bytes);
  void add(std::string name, std::string_view text);
  std::vector<std::byte> finish() const;

 private:
  std::vector<std::pair<std::string, std::vector<std::byte>>> sections_;
};

// The checked sections of a package; views into `bytes`, which must outlive
// the reader. `source` names the package in error messages.
class PackageReader {
 public:
  PackageReader(std::span<const std::byte> bytes, std::string source);

  const std::string& source() const noexcept { return source_; }
  const std::vector<PackageSection>& sections() const noexcept { return sections_; }
  // Every byte the reader was given: the package, then its signature block if signed.
  std::span<const std::byte> bytes() const noexcept { return bytes_; }
  // The signature block after the package, empty when it is unsigned. Only
  // its size and magic are checked here; check_package_signature (signature.h)
  // checks the rest and whether the signature holds.
  std::span<const std::byte> signature_block() const noexcept { return signature_block_; }
  const PackageSection* find(std::string_view name) const noexcept;
  // Error(Load) naming the section when the package lacks it.
  const PackageSection& get(std::string_view name) const;
  std::string_view text(std::string_view name) const;

 private:
  std::string source_;
  std::span<const std::byte> bytes_;
  std::span<const std::byte> signature_block_;
  std::vector<PackageSection> sections_;
};

// One program of the packaged plan and what the package holds for it.
struct PackageProgram {
  std::string name;
  std::string device;  // as the plan names it ("CPU", "CL:0")
  // The kind of the program's packaged bytes, recorded by name
  // ("elf_object", "cubin"); nullopt ("source" in the manifest) when the
  // package holds none and the program is compiled from the plan's source,
  // which travels in the package in any case. The CPU compilers' kinds
  // (is_cpu_artifact) were made by the compiler PackageManifest::cpu names,
  // every other kind by the one PackageManifest::devices[device] names.
  std::optional<ArtifactKind> artifact;
};

// An input or output of the packaged plan, as its caller sees it: a base
// buffer of role "input", or an output of the plan.
struct PackagePort {
  std::string name;
  DType dtype = DType::F32;
  std::vector<size_t> shape;  // 0 for a variable dimension (its bounds are the plan variable's)
  // Per dimension, the plan variable it is, or "" for a fixed one; empty
  // when none is variable. The manifest writes a shape as [ "batch", 3 ].
  std::vector<std::string> dim_variables;
};

// The "manifest" section: what the package was built from and for.
struct PackageManifest {
  uint32_t format = kPackageFormatVersion;
  std::string svod_version;
  std::string exporter;                       // what made the plan ("svod pack", "svod.tinygrad"); version 2
  std::vector<PackagePort> inputs;            // version 2
  std::vector<PackagePort> outputs;           // version 2
  std::string plan_name;                      // the plan file it was packed from
  std::map<std::string, int64_t> variables;   // --var values given to svod pack
  std::optional<CompilerIdentity> cpu;        // the compiler of the CPU objects
  // The compiler identity of the binaries for each other device, by the
  // plan's name for it ("CL:0", "CUDA:0"): for OpenCL the platform, device,
  // OpenCL and driver versions; for CUDA NVRTC and the architecture.
  std::map<std::string, CompilerIdentity> devices;
  std::vector<PackageProgram> programs;       // in plan order
  std::vector<std::string> buffers;           // buffers with an "init/<name>" section
  std::vector<std::string> expected;          // outputs with an "expect/<name>" section
};

std::string write_manifest(const PackageManifest& manifest);
// Error(Load) naming `source` and the field at fault.
PackageManifest read_manifest(std::string_view json, std::string_view source);

// What a reader says of a package of a format `version` it does not read
// (a newer one: "written by a newer svod").
std::string unread_version(uint64_t version);

// The manifest's word for `artifact`: its name, "source" for none.
std::string_view artifact_name(const std::optional<ArtifactKind>& artifact) noexcept;

// Section names.
inline constexpr std::string_view kManifestSection = "manifest";
inline constexpr std::string_view kPlanSection = "plan";
std::string program_section(std::string_view program);
std::string init_section(std::string_view buffer);
std::string expect_section(std::string_view output);

}  // namespace svod
