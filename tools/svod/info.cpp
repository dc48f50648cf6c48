#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "svod/base/env.h"
#include "svod/base/error.h"
#include "svod/base/thread_pool.h"
#include "svod/compile/clang_compiler.h"
#include "svod/compile/compile_policy.h"
#include "svod/compile/llvm_plugin.h"
#include "svod/compile/cpu_compiler.h"
#include "svod/registry/registry.h"
#include "svod/base/cpu_features.h"
#include "svod/base/file_read.h"
#include "svod/package/package.h"
#include "tools/svod/commands.h"
#include "tools/svod/common.h"

namespace svod::cli {
namespace {

std::string size_text(size_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < 1024 * 1024) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024.0));
}

std::string port_text(const PackagePort& port) {
  std::vector<std::string> dims;
  for (size_t d = 0; d < port.shape.size(); ++d)
    dims.push_back(port.dim_variables.empty() || port.dim_variables[d].empty() ? std::to_string(port.shape[d])
                                                                               : port.dim_variables[d]);
  return fmt::format("  {}  {} [{}]\n", port.name, to_string(port.dtype), fmt::join(dims, ", "));
}

// What a package holds, read without loading it: who made and signed it,
// its inputs and outputs, variables, kernels and data, and the CPU its
// objects were built for.
// The CPU a package's objects were built for, the features they need among
// those svod checks, and whether this CPU has them.
void describe_cpu_objects(const CompilerIdentity& cpu) {
  fmt::print("cpu objects: {} {}, for {} cpu {} ({} features recorded)\n", cpu.name, cpu.version, cpu.target_triple,
             cpu.target_cpu, cpu.target_features.size());
  std::vector<std::string> needed;
  for (const auto& known : known_cpu_features())
    if (std::find(cpu.target_features.begin(), cpu.target_features.end(), "+" + known.name) !=
        cpu.target_features.end())
      needed.push_back(known.name);
  fmt::print("  they need: {}\n", needed.empty() ? "no feature svod checks" : fmt::format("{}", fmt::join(needed, ", ")));
  const std::string arch = cpu.target_triple.substr(0, cpu.target_triple.find('-'));
  const std::vector<std::string> missing = missing_cpu_features(cpu.target_features);
  if (arch != host_arch())
    fmt::print("  this machine: {}, not {}: loading compiles from the packaged sources (or refuses)\n", host_arch(),
               arch);
  else if (!missing.empty())
    fmt::print("  this CPU lacks {}: loading compiles from the packaged sources (or refuses: svod run "
               "--on-cpu-mismatch refuse)\n",
               fmt::join(missing, ", "));
  else
    fmt::print("  this CPU has them: the objects load as they are\n");
}

void describe_package(const std::string& path) {
  const std::string text = read_regular_file(path, "package");
  const PackageReader reader(std::as_bytes(std::span(text)), path);
  const std::optional<PublicKey> signer = check_package_signature(reader);
  const PackageManifest m = read_manifest(reader.text(kManifestSection), reader.source());
  const PlanFile file = parse_plan_text(reader.text(kPlanSection), ".", reader.source());
  fmt::print("package: {} (format {}, {})\n", path, m.format, size_text(text.size()));
  fmt::print("made by: svod {}{}; plan {}\n", m.svod_version,
             m.exporter.empty() ? std::string() : fmt::format(", exporter {}", m.exporter), m.plan_name);
  fmt::print("signed by: {}\n", signer ? fmt::format("key {}", signer->id()) : std::string("nobody (unsigned)"));
  fmt::print("inputs:{}\n", m.inputs.empty() ? " none" : "");
  for (const PackagePort& port : m.inputs) fmt::print("{}", port_text(port));
  fmt::print("outputs:{}\n", m.outputs.empty() ? (m.format < 2 ? " (not recorded before format 2)" : " none") : "");
  for (const PackagePort& port : m.outputs) fmt::print("{}", port_text(port));
  fmt::print("variables:{}\n", file.variables.empty() ? " none" : "");
  for (const PlanFileVariable& v : file.variables) {
    const auto it = m.variables.find(v.variable.name);
    fmt::print("  {} in [{}, {}], {}\n", v.variable.name, v.variable.min, v.variable.max,
               it == m.variables.end() ? v.value : it->second);
  }
  std::map<std::string, size_t> kinds;
  for (const PackageProgram& p : m.programs) ++kinds[fmt::format("{} for {}", artifact_name(p.artifact), p.device)];
  std::vector<std::string> kind_text;
  for (const auto& [kind, n] : kinds) kind_text.push_back(fmt::format("{} {}", n, kind));
  fmt::print("kernels: {}{}\n", m.programs.size(), kinds.empty() ? "" : fmt::format(" ({})", fmt::join(kind_text, ", ")));
  // Kernels packed as variants (ProgramSpec::recipe), by recipe.
  std::map<std::string, size_t> recipes;
  for (const PlanFileProgram& p : file.programs)
    if (!p.spec.recipe.empty()) ++recipes[p.spec.recipe];
  std::vector<std::string> recipe_text;
  for (const auto& [recipe, n] : recipes) recipe_text.push_back(fmt::format("{} by {}", n, recipe));
  if (!recipes.empty()) fmt::print("variants: {} (the others by the default recipe)\n", fmt::join(recipe_text, ", "));
  // Base buffers by role; a buffer without one (an older plan file) counts
  // as data when the package carries its contents.
  std::map<std::string, std::pair<size_t, size_t>> roles;
  for (const PlanFileBuffer& b : file.buffers) {
    if (b.view_of) continue;
    const std::string role = b.role ? std::string(to_string(*b.role))
                                    : b.init.kind == BufferInit::Kind::Npy ? "data (no role)" : "other (no role)";
    roles[role].first += 1;
    roles[role].second += b.bytes();
  }
  fmt::print("buffers:\n");
  for (const auto& [role, counted] : roles)
    fmt::print("  {}: {} buffer{}, {}\n", role, counted.first, counted.first == 1 ? "" : "s", size_text(counted.second));
  if (m.cpu) describe_cpu_objects(*m.cpu);
  for (const auto& [device, id] : m.devices) fmt::print("{} binaries: {} {}\n", device, id.name, id.version);
}

}  // namespace

int info(const std::string& package) {
  if (!package.empty()) {
    try {
      describe_package(package);
    } catch (const Error& e) {
      return fail("info", e);
    }
    return 0;
  }
  return info();
}

int info() {
  fmt::print("svod {}\n", SVOD_VERSION);
  try {
    ClangCompiler clang;
    const CompilerIdentity& id = clang.identity();
    fmt::print("toolchain: {}\n  version: {}\n  target:  {} (cpu {}, {} features)\n", id.path, id.version,
               id.target_triple, id.target_cpu, id.target_features.size());
  } catch (const Error& e) {
    fmt::print("toolchain: none ({})\n", e.what());
  }
  try {
    const CpuCompilerChoice choice = default_cpu_compiler();
    fmt::print("cpu compiler: {} ({})\n", to_string(choice.compiler), choice.reason);
    const LlvmPluginStatus& llvm = llvm_plugin();
    if (llvm.available()) fmt::print("  llvm:    {} ({})\n", llvm.compiler->identity().version, llvm.path);
    else if (choice.reason.find(llvm.error) == std::string::npos) fmt::print("  llvm:    unavailable: {}\n", llvm.error);
  } catch (const Error& e) {
    fmt::print("cpu compiler: none ({})\n", e.what());
  }
  try {
    fmt::print("compiling: {}\n", compile_allowed() ? "allowed" : "off (SVOD_COMPILE=0): only stored objects and packages run");
  } catch (const Error& e) {
    fmt::print("compiling: {}\n", e.what());
  }
  // What a package's recorded CPU features are checked against.
  std::vector<std::string> lacking;
  for (const auto& f : known_cpu_features())
    if (!f.present) lacking.push_back(f.name);
  fmt::print("cpu features: {} checked for packages ({}), lacking: {}\n", known_cpu_features().size(), host_arch(),
             lacking.empty() ? "none" : fmt::format("{}", fmt::join(lacking, ", ")));
  // The device kinds' own compilers (NVRTC compiles without a GPU).
  for (const auto& line : device_registry().toolchains()) fmt::print("{}\n", line);
  // Every device the registry can open, and the kinds that have none here
  // with the reason.
  fmt::print("devices:\n");
  for (const auto& d : device_registry().list_devices())
    fmt::print("  {:<6} {}{}\n", d.name, d.available ? "" : "unavailable: ", d.description);
  // Where the count comes from: SVOD_THREADS when it sets one, else the CPUs
  // this process may run on.
  try {
    const int threads = thread_count();
    fmt::print("threads: {} ({})\n", threads,
               env_int(EnvVar::Threads, 0) > 0 ? "SVOD_THREADS"
                                              : "the CPUs this process may run on; SVOD_THREADS sets another count");
  } catch (const Error& e) {
    fmt::print("threads: {}\n", e.what());
  }
  return 0;
}

}  // namespace svod::cli
