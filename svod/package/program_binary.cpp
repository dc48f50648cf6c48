#include "svod/package/program_binary.h"

#include <atomic>

#include "svod/base/error.h"
#include "svod/base/hash.h"
#include "svod/cache/cache_key.h"
#include "svod/package/package.h"

namespace svod {
namespace {

constexpr std::string_view kSourceSection = "source";
constexpr std::string_view kCompiledFromSection = "compiled_from";
constexpr std::string_view kWhat = "program binary";

}  // namespace

std::vector<std::byte> compile_program_binary(Device& device, const ProgramSpec& spec) {
  device.check_compilable(spec);
  const std::shared_ptr<const LoadedArtifact> made = load_or_compile(device, spec)->artifact();

  PackageManifest manifest;
  manifest.svod_version = SVOD_VERSION;
  manifest.programs.push_back(PackageProgram{spec.entry, device.name(), made->artifact.kind});
  const CompilerIdentity& identity = made->made_by ? *made->made_by : device.compiler().identity();
  if (is_cpu_artifact(made->artifact.kind)) manifest.cpu = identity;
  else manifest.devices[device.name()] = identity;

  PackageWriter writer;
  writer.add(std::string(kManifestSection), write_manifest(manifest));
  writer.add(std::string(kSourceSection), std::string_view(spec.source));
  writer.add(std::string(kCompiledFromSection), source_hash(spec).to_hex());
  writer.add(program_section(spec.entry), made->artifact.bytes);
  return writer.finish();
}

std::string program_binary_format() {
  // A fixed spec's compiled_from hash, which changes with the hashing.
  ProgramSpec probe;
  probe.language = Language::C;
  probe.entry = "k";
  probe.source = "void k(void) {}";
  probe.defines = {{"N", "1"}};
  const Hash128 scheme = source_hash(probe);
  Hasher h;
  h.u64(kPackageFormatVersion).u64(scheme.low).u64(scheme.high);
  return h.finish().to_hex().substr(0, 8);
}

ProgramBinary::ProgramBinary(std::span<const std::byte> bytes) : reader_(bytes, std::string(kWhat)) {
  if (reader_.find(kPlanSection) != nullptr)
    throw make_error(ErrorKind::Validation,
                     "these bytes are a package of a plan, not a program binary (load them as a package)");
  manifest_ = read_manifest(reader_.text(kManifestSection), reader_.source());
  if (manifest_.programs.size() != 1)
    throw make_error(ErrorKind::Load, "{}: section \"manifest\" lists {} programs, not one", reader_.source(),
                     manifest_.programs.size());
}

std::string_view ProgramBinary::source() const { return reader_.text(kSourceSection); }

std::shared_ptr<const Program> ProgramBinary::load(Device& device, ProgramSpec spec) const {
  const std::string& name = manifest_.programs.front().name;
  if (spec.source.empty()) spec.source = std::string(source());
  if (reader_.text(kCompiledFromSection) != source_hash(spec).to_hex())
    throw make_error(ErrorKind::Validation,
                     "program \"{}\": the {} of \"{}\" was compiled from another source, language, entry or "
                     "defines than the program has",
                     spec.display_name(), kWhat, name);
  device.check_compilable(spec);
  std::atomic<size_t> compiled{0};
  return load_packaged_program(reader_, manifest_, name, device, spec, compiled);
}

}  // namespace svod
