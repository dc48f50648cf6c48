// `svod pack PLAN.json -o MODEL.svodpkg`: compile a plan's programs once and
// write the plan with its objects, data and expectations as one package
// (svod/package, docs/PACKAGE_FORMAT.md), signed with --sign NAME.key;
// `svod pack --keygen NAME` writes a signing key pair (docs/SECURITY.md).
// With --variants each kernel is packed as the variant chosen for it
// (svod/tune/variants.h, as `svod tune --variants`), its recipe in the plan.
//
// Ranks (run_on_ranks, common.h, as svod run): nothing in a package depends
// on the rank or the number of ranks — the programs, the initial data and the
// expectations are the same on every rank, and rank and world_size are set
// when the package loads. But loading a plan checks its collectives' sizes
// and roots against the number of ranks, so a plan made for 4 ranks does not
// load as one. Under an MPI launcher, or with --ranks N, every rank loads the
// plan as its rank (the ranks also check that they all load the same plan
// with the same variables); rank 0 packs it, signs it and writes the one
// package, and the others only take part in the load.
#include <fmt/format.h>

#include <filesystem>
#include <optional>
#include <system_error>

#include "svod/comm/communicator.h"
#include "svod/package/package.h"
#include "svod/package/signature.h"
#include "tools/svod/commands.h"
#include "tools/svod/common.h"
#include "tools/svod/variants.h"

namespace svod::cli {
namespace {

// The package's summary, read back from its bytes as a loader will: it comes
// from the package itself.
void print_summary(RankOutput& output, const PackOptions& options, const std::vector<std::byte>& bytes,
                   const std::optional<SecretKey>& key, const Communicator* comm) {
  const PackageReader reader(bytes, options.out);
  const PackageManifest manifest = read_manifest(reader.text(kManifestSection), options.out);
  size_t objects = 0, binaries = 0;
  for (const auto& p : manifest.programs) {
    if (!p.artifact) continue;
    if (is_cpu_artifact(*p.artifact)) ++objects;
    else ++binaries;
  }
  std::string devices;
  for (const auto& [device, id] : manifest.devices) devices += fmt::format(" {} ({})", device, id.target_cpu);
  output.print("packed {} -> {}: {} bytes, {} sections\n", options.plan, options.out, bytes.size(),
               reader.sections().size());
  output.print("  programs: {} ({} as CPU objects{}, {} as device binaries{}, {} as source only)\n",
               manifest.programs.size(), objects,
               manifest.cpu ? fmt::format(" for {} cpu {}", manifest.cpu->target_triple, manifest.cpu->target_cpu) : "",
               binaries, binaries ? " for" + devices : "", manifest.programs.size() - objects - binaries);
  output.print("  initial data: {} buffer{}; expected outputs: {}\n", manifest.buffers.size(),
               manifest.buffers.size() == 1 ? "" : "s", manifest.expected.size());
  if (comm && comm->size() > 1)
    output.print("  loaded on {} ranks ({}), whose collectives' sizes and roots it fits; the package holds nothing "
                 "rank-specific\n",
                 comm->size(), comm->transport());
  if (key) output.print("  signed by key {} ({})\n", key->public_key().id(), options.sign);
}

// One rank's part: `comm` is null for a plain pack. A failure while the
// ranks load the plan together aborts the communicator so that the others
// stop waiting for this one; signing and writing concern rank 0 alone, once
// a barrier has shown that every rank loaded it (a rank that failed leaves
// the old package as it was).
int pack_rank(const PackOptions& options, const std::string& cpu_compiler, const std::shared_ptr<Communicator>& comm,
              RankOutput& output) {
  bool loaded = false;
  auto failed = [&](const Error& e) { return rank_failed("pack", e, comm, !loaded, output); };
  if (comm && comm->rank() != 0) {
    try {
      load_plan(parse_plan_file(options.plan),
                LoadOptions{.vars = parse_vars(options.vars), .communicator = comm, .cpu_compiler = cpu_compiler});
      loaded = true;
      comm->barrier();  // rank 0 writes only once every rank has loaded
    } catch (const Error& e) {
      return failed(e);
    }
    return 0;
  }
  std::optional<SecretKey> key;
  std::vector<std::byte> bytes;
  try {
    // The key is read first: a bad one fails before the plan is compiled.
    if (!options.sign.empty()) key.emplace(read_secret_key(options.sign));
    svod::PackOptions pack_options;
    pack_options.vars = parse_vars(options.vars);
    pack_options.communicator = comm;
    pack_options.cpu_compiler = cpu_compiler;
    pack_options.target_cpu = options.target_cpu;
    pack_options.sources_only = options.sources_only;
    const VariantOptions variants = variant_options(options.tolerance);
    if (options.variants) {
      pack_options.prepare = [&](ExecutionPlan& plan) {
        // Kernels are chosen for as they run: on the buffers the plan left.
        plan.execute();
        output.print("{}", variant_table(plan, choose_variants(plan, variants)));
      };
    }
    bytes = pack_plan(options.plan, pack_options);
    loaded = true;
    // A rank that failed to load fails this barrier too: the old package
    // stays as it was.
    if (comm) comm->barrier();
  } catch (const Error& e) {
    return failed(e);
  }
  try {
    if (key) bytes = sign_package(std::move(bytes), *key);
    write_package(options.out, bytes);
    print_summary(output, options, bytes, key, comm.get());
  } catch (const Error& e) {
    return failed(e);
  }
  return 0;
}

// Whether `a` and `b` name one file (the same path, or links to it).
bool same_file(const std::string& a, const std::string& b) {
  std::error_code error;
  if (std::filesystem::equivalent(a, b, error)) return true;
  return std::filesystem::weakly_canonical(a, error) == std::filesystem::weakly_canonical(b, error) && !error;
}

}  // namespace

int pack(const PackOptions& options) {
  std::string cpu_compiler;
  try {
    if (!options.keygen.empty()) {
      if (launched_by_mpi())
        throw make_error(ErrorKind::Validation,
                         "--keygen: this process was started by an MPI launcher, whose ranks would each write a "
                         "different key pair to the same files; make keys without mpirun");
      const PublicKey key = generate_key_pair(options.keygen);
      fmt::print("wrote {0}.key (secret: keep it private) and {0}.pub (public: for SVOD_TRUSTED_KEYS); key id {1}\n",
                 options.keygen, key.id());
      return 0;
    }
    if (options.plan.empty() || options.out.empty())
      throw make_error(ErrorKind::Validation, "give a plan file and -o MODEL.svodpkg (or --keygen NAME)");
    // The package is written over what -o names: never over an input.
    if (same_file(options.out, options.plan))
      throw make_error(ErrorKind::Validation, "-o {}: that is the plan being packed; write the package elsewhere",
                       options.out);
    if (!options.sign.empty() && same_file(options.out, options.sign))
      throw make_error(ErrorKind::Validation,
                       "-o {}: that is the secret key given to --sign; write the package elsewhere", options.out);
    cpu_compiler = cpu_compiler_option(options.cpu_compiler);
  } catch (const Error& e) {
    return fail("pack", e);
  }
  return run_on_ranks("pack", options.plan, RanksOptions{options.ranks, false},
                      [&](const std::shared_ptr<Communicator>& comm, RankOutput& output) {
                        return pack_rank(options, cpu_compiler, comm, output);
                      });
}

}  // namespace svod::cli
