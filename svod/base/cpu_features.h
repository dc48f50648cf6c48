// The host CPU's instruction-set features, named as LLVM names them in
// `-target-feature +avx2` (and so in CompilerIdentity::target_features), read
// from the processor itself (cpuid and the OS-enabled state in XCR0) rather
// than from a compiler: a machine running a package may have none.
//
// Only features that change which instructions code may contain are known
// (SIMD, bit manipulation, crypto, AMX, ...); on other architectures than
// x86-64 nothing is known. Unknown names are not judged: a package records
// dozens of LLVM features (tuning flags, "64bit", "x87") that do not need a
// check.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace svod {

// The LLVM target architecture of this machine ("x86_64", "aarch64").
std::string host_arch();

// The names (without '+') among `features` ("+avx512f", "-avx512fp16", ...)
// that are enabled there, known here, and missing on this CPU.
std::vector<std::string> missing_cpu_features(std::span<const std::string> features);

// Every feature name this check knows, and whether this CPU has it (read
// once per process).
struct KnownCpuFeature {
  std::string name;
  bool present = false;
};
const std::vector<KnownCpuFeature>& known_cpu_features();

// The processor's vendor, family, model and stepping and which known features
// it has: what a compiler that targets the host CPU (LLVM's host CPU name and
// features) decides from. Empty where nothing is known (not x86-64).
const std::string& host_cpu_signature();

}  // namespace svod
