// `svod pack PLAN.json -o MODEL.svodpkg`: compile a plan's programs once and
// write the plan with its objects, data and expectations as one package
// (svod/package, docs/PACKAGE_FORMAT.md), signed with --sign NAME.key;
// `svod pack --keygen NAME` writes a signing key pair (docs/SECURITY.md).
#include <fmt/format.h>

#include <optional>

#include "svod/package/package.h"
#include "svod/package/signature.h"
#include "tools/svod/commands.h"
#include "tools/svod/common.h"

namespace svod::cli {

int pack(const PackOptions& options) {
  try {
    if (!options.keygen.empty()) {
      const PublicKey key = generate_key_pair(options.keygen);
      fmt::print("wrote {0}.key (secret: keep it private) and {0}.pub (public: for SVOD_TRUSTED_KEYS); key id {1}\n",
                 options.keygen, key.id());
      return 0;
    }
    if (options.plan.empty() || options.out.empty())
      throw make_error(ErrorKind::Validation, "give a plan file and -o MODEL.svodpkg (or --keygen NAME)");
    // The key is read first: a bad one fails before the plan is compiled.
    std::optional<SecretKey> key;
    if (!options.sign.empty()) key.emplace(read_secret_key(options.sign));
    select_cpu_backend(options.backend);
    svod::PackOptions pack_options;
    pack_options.vars = parse_vars(options.vars);
    std::vector<std::byte> bytes = pack_plan(options.plan, pack_options);
    if (key) bytes = sign_package(std::move(bytes), *key);
    // Read back what was written, as a loader will: the summary comes from the package itself.
    const PackageReader reader(bytes, options.out);
    const PackageManifest manifest = read_manifest(reader.text(kManifestSection), options.out);
    size_t objects = 0, binaries = 0;
    for (const auto& p : manifest.programs) {
      if (p.artifact == PackageProgram::Artifact::Source) continue;
      if (is_cpu_artifact(p.artifact)) ++objects;
      else ++binaries;
    }
    std::string devices;
    for (const auto& [device, id] : manifest.devices) devices += fmt::format(" {} ({})", device, id.target_cpu);
    write_package(options.out, bytes);
    fmt::print("packed {} -> {}: {} bytes, {} sections\n", options.plan, options.out, bytes.size(),
               reader.sections().size());
    fmt::print("  programs: {} ({} as CPU objects{}, {} as device binaries{}, {} as source only)\n",
               manifest.programs.size(), objects,
               manifest.cpu ? fmt::format(" for {} {}", manifest.cpu->target_triple, manifest.cpu->target_cpu) : "",
               binaries, binaries ? " for" + devices : "", manifest.programs.size() - objects - binaries);
    fmt::print("  initial data: {} buffer{}; expected outputs: {}\n", manifest.buffers.size(),
               manifest.buffers.size() == 1 ? "" : "s", manifest.expected.size());
    if (key) fmt::print("  signed by key {} ({})\n", key->public_key().id(), options.sign);
  } catch (const Error& e) {
    return fail("pack", e);
  }
  return 0;
}

}  // namespace svod::cli
