#include "svod/package/package.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <algorithm>
#include <tuple>

#include "svod/base/error.h"
#include "svod/base/file_read.h"
#include "svod/base/file_write.h"
#include "svod/base/json_depth.h"
#include "svod/base/log.h"
#include "svod/base/thread_pool.h"
#include "svod/base/thread_pool_start.h"
#include "svod/compile/compile_policy.h"
#include "svod/compile/cpu_compiler.h"
#include "svod/device/host_device.h"
#include "svod/guard/checked_mode.h"
#include "svod/package/signature.h"

namespace svod {
namespace {

namespace fs = std::filesystem;

std::span<const std::byte> as_bytes(const Buffer& buffer) {
  return {static_cast<const std::byte*>(buffer.data()), buffer.bytes()};
}

// A buffer's contents in host memory (copied off its device when it has one).
std::vector<std::byte> host_copy(const Buffer& buffer) {
  if (buffer.is_host()) {
    const auto bytes = as_bytes(buffer);
    return {bytes.begin(), bytes.end()};
  }
  const Buffer staging = buffer.device().allocate_host(buffer.dtype(), buffer.count());
  buffer.device().copy(staging, buffer);
  const auto bytes = as_bytes(staging);
  return {bytes.begin(), bytes.end()};
}

// The plan's JSON with every source_file replaced by its text, so that the
// packaged plan reads no other file.
std::string self_contained_plan(const fs::path& path, const PlanFile& file) {
  const std::string text = read_regular_file(path, "plan file");
  // parse_plan_file accepted this text a moment ago; failing now means the file changed meanwhile.
  auto json = json_too_deep_at(text) ? nlohmann::ordered_json(nullptr)  // would overflow the stack
                                     : nlohmann::ordered_json::parse(text, nullptr, false);
  if (json.is_discarded() || !json.is_object())
    throw make_error(ErrorKind::Io, "{}: the file changed while it was being packed", path.string());
  if (auto programs = json.find("programs"); programs != json.end()) {
    for (auto& [name, program] : programs->items()) {
      const PlanFileProgram* parsed = file.find_program(name);
      if (parsed == nullptr || !program.is_object())
        throw make_error(ErrorKind::Io, "{}: the file changed while it was being packed", path.string());
      if (!parsed->spec.recipe.empty()) program["recipe"] = parsed->spec.recipe;
      if (!program.contains("source_file")) continue;
      program.erase("source_file");
      program["source"] = parsed->spec.source;
    }
  }
  return json.dump(1);
}

// Host memory inside a loaded package's image (FileImage): the buffer's data
// where it lies. The image is the process's own memory, so kernels that write
// the buffer change it, never the file.
class PackageStorage final : public Storage {
 public:
  PackageStorage(Device& device, std::span<const std::byte> bytes, std::shared_ptr<const void> owner)
      : Storage(device, bytes.size(), const_cast<std::byte*>(bytes.data())), owner_(std::move(owner)) {}

 private:
  std::shared_ptr<const void> owner_;
};

// A package file's bytes in private anonymous memory: read once, then
// verified and used from there, so that nothing done to the file later (a
// rewrite after the signature was checked, a truncation that would turn a
// mapping's pages into SIGBUS) reaches what was loaded.
//
// A package of 2 MiB or more is read into memory aligned to 2 MiB and marked
// for transparent huge pages (MADV_HUGEPAGE; the kernel gives them where it
// has them, and small pages otherwise): reading 100 MB into small pages
// spent most of its time faulting in 25,600 of them (50-100 ms against 14-48
// ms on this project's test machine), and the kernels that read the
// constants where they lie miss the TLB less.
class FileImage {
 public:
  explicit FileImage(const fs::path& path) {
    // Only a regular file: a FIFO or a device is refused, never waited on.
    struct stat st {};
    const FileDescriptor fd = open_regular_file(path, "package", &st);
    size_ = static_cast<size_t>(st.st_size);
    if (size_ == 0) return;
    const bool huge = size_ >= kHugePage;
    mapped_ = huge ? (size_ + kHugePage - 1) / kHugePage * kHugePage + kHugePage : size_;
    void* p = ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      throw make_error(ErrorKind::Io, "{}: cannot allocate {} bytes for the package: {}", path.string(), size_,
                       std::strerror(errno));
    base_ = static_cast<std::byte*>(p);
    data_ = base_;
    if (huge) {
      data_ = base_ + (kHugePage - reinterpret_cast<uintptr_t>(base_) % kHugePage) % kHugePage;
      (void)::madvise(data_, mapped_ - static_cast<size_t>(data_ - base_), MADV_HUGEPAGE);  // a hint
    }
    size_t got = 0;
    while (got < size_) {
      const ssize_t n = ::read(fd.get(), data_ + got, size_ - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int error = n < 0 ? errno : 0;
        ::munmap(base_, mapped_);
        throw make_error(ErrorKind::Io, "{}: {} while reading the package (byte {} of {})", path.string(),
                         error ? std::strerror(error) : "the file became shorter", got, size_);
      }
      got += static_cast<size_t>(n);
    }
  }
  ~FileImage() {
    if (base_) ::munmap(base_, mapped_);
  }
  FileImage(const FileImage&) = delete;
  FileImage& operator=(const FileImage&) = delete;

  std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }

 private:
  static constexpr size_t kHugePage = size_t{2} << 20;  // x86-64's and aarch64's (4 KiB pages) PMD size
  std::byte* base_ = nullptr;  // the mapping: mapped_ bytes
  size_t mapped_ = 0;
  std::byte* data_ = nullptr;  // the file's bytes, inside it
  size_t size_ = 0;
};

// The packaged artifact of `program`, copied out of the package.
Artifact artifact_of(const PackageReader& reader, const std::string& program, ArtifactKind kind) {
  const auto bytes = reader.get(program_section(program)).bytes;
  Artifact artifact;
  artifact.kind = kind;
  artifact.bytes.assign(bytes.begin(), bytes.end());
  return artifact;
}

// What a package is made of, from a plan file (pack_plan(path)) or a plan
// in memory (pack_plan(plan)): the plan's self-contained JSON and its
// parsed form, the program each of its programs was loaded as (its object
// packed when it keeps one: Program::artifact), the contents of its npy
// buffers and the expected values of its npy expectations.
struct PackContents {
  std::string plan_name;
  std::string plan_text;
  const PlanFile& file;
  std::map<std::string, int64_t> variables;
  std::map<std::string, std::shared_ptr<const Program>> programs;
  std::map<std::string, std::vector<std::byte>> init;
  std::map<std::string, std::vector<double>> expected;
  std::string exporter;
  // PackOptions::target_cpu's compiler (null: the programs' own objects),
  // and PackOptions::sources_only.
  std::shared_ptr<const Compiler> target;
  bool sources_only = false;
};

// The compiler pack() makes CPU objects for options.target_cpu with; null
// when the programs' own objects are packed.
std::shared_ptr<const Compiler> target_compiler(const PackOptions& options) {
  if (options.target_cpu.empty() || options.sources_only) return nullptr;
  return cpu_compiler_for_target(options.target_cpu);
}

PackagePort port_of(const PlanFileBuffer& buffer, std::string name) {
  PackagePort port{std::move(name), buffer.dtype, buffer.shape, buffer.dim_variables};
  for (size_t d = 0; d < port.dim_variables.size(); ++d)
    if (!port.dim_variables[d].empty()) port.shape[d] = 0;
  return port;
}

// The one place packages are written.
std::vector<std::byte> pack(PackContents& contents) {
  const PlanFile& file = contents.file;
  PackageManifest manifest;
  manifest.svod_version = SVOD_VERSION;
  manifest.exporter = contents.exporter;
  manifest.plan_name = contents.plan_name;
  manifest.variables = contents.variables;
  for (const PlanFileBuffer& b : file.buffers)
    if (b.role == BufferRole::Input) manifest.inputs.push_back(port_of(b, b.name));
  for (const PlanFileOutput& out : file.outputs) manifest.outputs.push_back(port_of(*file.find_buffer(out.buffer), out.buffer));

  // Objects for another CPU: the CPU programs' sources compiled for it,
  // on the pool (a clang process each).
  std::map<std::string, Artifact> retargeted;
  if (contents.target) {
    std::vector<const PlanFileProgram*> cpu_programs;
    for (const auto& p : file.programs) {
      const auto it = contents.programs.find(p.name);
      const auto object = it == contents.programs.end() ? nullptr : it->second->artifact();
      if (object && is_cpu_artifact(object->artifact.kind)) cpu_programs.push_back(&p);
    }
    std::vector<Artifact> made(cpu_programs.size());
    parallel_for(cpu_programs.size(), [&](size_t i) { made[i] = contents.target->compile(cpu_programs[i]->spec); });
    for (size_t i = 0; i < cpu_programs.size(); ++i) retargeted[cpu_programs[i]->name] = std::move(made[i]);
  }

  PackageWriter writer;
  for (const auto& p : file.programs) {
    PackageProgram entry{p.name, p.device.empty() ? file.device : p.device, std::nullopt};
    const auto it = contents.programs.find(p.name);
    const std::shared_ptr<const LoadedArtifact> object =
        contents.sources_only || it == contents.programs.end() ? nullptr : it->second->artifact();
    if (object) {
      // The manifest records one compiler per device (and one for every CPU
      // object): an object another compiler made is packed as source.
      const auto other_cpu = retargeted.find(p.name);
      const bool retarget = other_cpu != retargeted.end();
      const Artifact& artifact = retarget ? other_cpu->second : object->artifact;
      const CompilerIdentity identity = retarget         ? contents.target->identity()
                                        : object->made_by ? *object->made_by
                                                          : it->second->device().compiler().identity();
      const bool cpu = is_cpu_artifact(artifact.kind);
      if (cpu && !manifest.cpu) manifest.cpu = identity;
      if (!cpu && !manifest.devices.contains(entry.device)) manifest.devices[entry.device] = identity;
      if ((cpu ? *manifest.cpu : manifest.devices.at(entry.device)).hash() == identity.hash()) {
        entry.artifact = artifact.kind;
        writer.add(program_section(p.name), artifact.bytes);
      }
    }
    manifest.programs.push_back(std::move(entry));
  }
  for (const auto& b : file.buffers) {
    if (b.view_of || b.init.kind != BufferInit::Kind::Npy) continue;
    writer.add(init_section(b.name), std::move(contents.init.at(b.name)));
    manifest.buffers.push_back(b.name);
  }
  for (const PlanFileOutput& out : file.outputs) {
    const auto it = contents.expected.find(out.buffer);
    if (it == contents.expected.end()) continue;
    const auto* p = reinterpret_cast<const std::byte*>(it->second.data());
    writer.add(expect_section(out.buffer), std::vector<std::byte>(p, p + it->second.size() * sizeof(double)));
    manifest.expected.push_back(out.buffer);
  }
  writer.add(std::string(kPlanSection), contents.plan_text);
  writer.add(std::string(kManifestSection), write_manifest(manifest));
  return writer.finish();
}

LoadedPackage load_from(const PackageReader& reader, std::shared_ptr<const void> image, const fs::path& folder,
                        const PackageLoadOptions& options) {
  // Before anything in the package is used: a wrong signature, and under
  // SVOD_TRUSTED_KEYS an untrusted signer or none, refuse it.
  std::optional<PublicKey> signer = check_package_signature(reader);
  PackageManifest manifest = read_manifest(reader.text(kManifestSection), reader.source());
  const std::string_view plan_text = reader.text(kPlanSection);
  // parse_plan_text checks too, but its message names only the package.
  check_json_depth(plan_text, ErrorKind::Validation, fmt::format("{}: section \"plan\"", reader.source()));
  PlanFile file = parse_plan_text(plan_text, folder, reader.source());
  compile_allowed();  // checks SVOD_COMPILE's value before anything loads
  std::atomic<size_t> compiled{0};

  LoadOptions load;
  load.vars = manifest.variables;
  for (const auto& [name, value] : options.vars) load.vars[name] = value;
  load.communicator = options.communicator;
  load.inputs = options.inputs;
  load.cpu_compiler = options.cpu_compiler;
  load.npy_buffer = [&](const PlanFileBuffer& desc, Device& device) {
    const auto data = reader.get(init_section(desc.name)).bytes;
    if (data.size() != desc.bytes())
      throw make_error(ErrorKind::Load, "section \"{}\" holds {} bytes, the buffer has {}", init_section(desc.name),
                       data.size(), desc.bytes());
    // In checked mode the data goes into guarded memory like every other
    // buffer's.
    if (image && device.memory_is_host() && !memory_checked())
      return Buffer(std::make_shared<PackageStorage>(device, data, image), desc.dtype);
    Buffer buffer = device.allocate(desc.dtype, desc.count);
    if (buffer.is_host()) {
      if (!data.empty()) std::memcpy(buffer.data(), data.data(), data.size());
    } else {
      device.copy(buffer, Buffer(std::make_shared<PackageStorage>(host_device(), data, nullptr), desc.dtype));
    }
    return buffer;
  };
  load.npy_expected = [&](const PlanFileOutput& output) {
    const auto data = reader.get(expect_section(output.buffer)).bytes;
    if (data.size() % sizeof(double) != 0)
      throw make_error(ErrorKind::Load, "section \"{}\" holds {} bytes, not a whole number of f64 values",
                       expect_section(output.buffer), data.size());
    std::vector<double> values(data.size() / sizeof(double));
    if (!data.empty()) std::memcpy(values.data(), data.data(), data.size());
    return values;
  };
  load.build_program = [&](const PlanFileProgram& program, Device& device) {
    return load_packaged_program(reader, manifest, program.name, device, program.spec, compiled,
                                 options.on_cpu_mismatch, options.compile_source);
  };
  LoadedPlan loaded = load_plan(file, load);
  return LoadedPackage{std::move(manifest), std::move(file), std::move(loaded), compiled.load(), signer};
}

}  // namespace

std::shared_ptr<const Program> load_packaged_program(const PackageReader& reader, const PackageManifest& manifest,
                                                     const std::string& name, Device& device, const ProgramSpec& spec,
                                                     std::atomic<size_t>& compiled, CpuMismatch on_cpu_mismatch,
                                                     const CompileSource& compile_source) {
  auto compile = [&] { return compile_source ? compile_source(device, spec) : device.compile(spec); };
  const PackageProgram* entry = nullptr;
  for (const auto& p : manifest.programs)
    if (p.name == name) entry = &p;
  if (entry == nullptr)
    throw make_error(ErrorKind::Load, "{}: section \"manifest\": programs: no entry for program \"{}\"", reader.source(),
                     name);
  if (!entry->artifact) {
    compiled.fetch_add(1);
    return compile();
  }
  const ArtifactKind kind = *entry->artifact;
  // The packaged object or binary cannot be used: build the source instead when allowed.
  auto rebuild = [&](std::string_view what, const std::string& why) {
    if (is_cpu_artifact(kind) && on_cpu_mismatch == CpuMismatch::Refuse)
      throw make_error(ErrorKind::Unsupported,
                       "program \"{}\": the package's {} cannot run here ({}), and the load refuses to compile them "
                       "from source (on CPU mismatch: refuse)",
                       name, what, why);
    if (!compile_allowed())
      throw make_error(ErrorKind::Unsupported,
                       "program \"{}\": the package's {} cannot run here ({}), and compiling is off "
                       "(SVOD_COMPILE=0), so it cannot be rebuilt from its source",
                       name, what, why);
    if (debug_level() >= 1)
      log_debug("{}: program \"{}\": compiling from the packaged source because the {} cannot run here: {}",
                reader.source(), name, what, why);
    compiled.fetch_add(1);
    try {
      return compile();
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::DeviceUnavailable) throw;
      throw make_error(ErrorKind::DeviceUnavailable,
                       "program \"{}\": the package's {} cannot run here ({}), and there is no compiler to rebuild "
                       "it from its source: {}",
                       name, what, why, e.what());
    }
  };
  // The identity of the compiler that made the artifact (read_manifest
  // checked that the manifest records it) decides whether it can run on
  // this device; the device says why not.
  const CompilerIdentity& made_by = is_cpu_artifact(kind) ? *manifest.cpu : manifest.devices.at(entry->device);
  const std::string what =
      is_cpu_artifact(kind) ? std::string("CPU objects") : fmt::format("\"{}\" for {}", kind.name(), entry->device);
  const std::string why = device.artifact_mismatch(made_by);
  if (!why.empty()) return rebuild(what, why);
  try {
    return load_program(device, spec, artifact_of(reader, name, kind), made_by);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Load) throw;
    return rebuild(what, e.what());
  }
}

std::vector<std::byte> pack_plan(const fs::path& plan, const PackOptions& options) {
  PlanFile file = parse_plan_file(plan);

  // Load the plan once; each program keeps the object it was loaded from
  // (through the object cache, so a warm cache compiles nothing).
  std::mutex mutex;
  PackContents contents{.plan_name = plan.string(), .plan_text = {}, .file = file, .variables = options.vars,
                        .programs = {}, .init = {}, .expected = {}, .exporter = options.exporter,
                        .target = target_compiler(options), .sources_only = options.sources_only};
  LoadOptions load;
  load.vars = options.vars;
  load.communicator = options.communicator;
  load.cpu_compiler = options.cpu_compiler;
  load.build_program = [&](const PlanFileProgram& program, Device& device) {
    std::shared_ptr<const Program> made = device.compile(program.spec);
    std::lock_guard lock(mutex);
    contents.programs[program.name] = made;
    return made;
  };
  LoadedPlan loaded = load_plan(file, load);
  if (options.prepare) {
    // A program an op now runs in another's place (a variant) is packed
    // instead of the one it replaced, with its recipe in the plan; a program
    // that several ops launch goes as the first of them runs it.
    std::vector<std::shared_ptr<const Program>> before;
    for (size_t i = 0; i < loaded.plan.op_count(); ++i)
      if (const auto* kernel = std::get_if<KernelOp>(&loaded.plan.op(i))) before.push_back(kernel->program);
      else before.push_back(nullptr);
    options.prepare(loaded.plan);
    for (auto& [name, program] : contents.programs) {
      for (size_t i = 0; i < before.size(); ++i) {
        if (before[i] != program) continue;
        program = std::get<KernelOp>(loaded.plan.op(i)).program;
        break;
      }
      for (PlanFileProgram& p : file.programs)
        if (p.name == name) p.spec.recipe = program->spec().recipe;
    }
  }
  for (const auto& b : file.buffers) {
    if (b.view_of || b.init.kind != BufferInit::Kind::Npy) continue;
    contents.init[b.name] = host_copy(loaded.plan.buffer(*loaded.plan.find_buffer(b.name)));
  }
  for (size_t i = 0; i < file.outputs.size(); ++i) {
    const PlanFileOutput& out = file.outputs[i];
    if (out.expect && out.expect->npy) contents.expected[out.buffer] = loaded.outputs[i].expected;
  }
  contents.plan_text = self_contained_plan(plan, file);
  return pack(contents);
}

std::vector<std::byte> pack_plan(const ExecutionPlan& plan, const SaveOptions& save, const PackOptions& options) {
  SavedPlan saved = to_plan_file(plan, save, ".");
  for (const auto& [name, value] : options.vars) {
    const auto it = std::find_if(saved.file.variables.begin(), saved.file.variables.end(),
                                 [&](const PlanFileVariable& v) { return v.variable.name == name; });
    if (it == saved.file.variables.end())
      throw make_error(ErrorKind::Validation, "vars: the plan has no variable \"{}\" to set", name);
    it->variable.check(value);
    it->value = value;
  }
  const std::string text = write_plan_text(saved.file);
  PackContents contents{.plan_name = options.plan_name, .plan_text = text, .file = saved.file,
                        .variables = options.vars, .programs = std::move(saved.programs),
                        .init = std::move(saved.data), .expected = {}, .exporter = options.exporter,
                        .target = target_compiler(options), .sources_only = options.sources_only};
  return pack(contents);
}

CpuMismatch parse_cpu_mismatch(std::string_view name) {
  if (name == "recompile") return CpuMismatch::Recompile;
  if (name == "refuse") return CpuMismatch::Refuse;
  throw make_error(ErrorKind::Validation, "on CPU mismatch \"{}\": expected \"recompile\" or \"refuse\"", name);
}

void write_package(const fs::path& path, std::span<const std::byte> bytes) { write_file_atomically(path, {bytes}); }

LoadedPackage load_package(const fs::path& path, const PackageLoadOptions& options) {
  // A plan runs on the pool: its start (a few milliseconds of another core)
  // overlaps reading and checking the file instead of the first call.
  start_thread_pool();
  auto image = std::make_shared<const FileImage>(path);
  const PackageReader reader(image->bytes(), path.string());
  fs::path folder = path.parent_path();
  if (folder.empty()) folder = ".";
  return load_from(reader, image, folder, options);
}

LoadedPackage load_package(std::span<const std::byte> bytes, const PackageLoadOptions& options) {
  start_thread_pool();  // as from a path
  const PackageReader reader(bytes, "package in memory");
  return load_from(reader, nullptr, ".", options);
}

bool is_package_file(const fs::path& path) {
  // What is not a regular file is no package (and must not be waited on).
  const RegularFile file = try_open_regular_file(path);
  if (!file.fd) return false;
  char magic[8] = {};
  size_t got = 0;
  while (got < sizeof magic) {
    const ssize_t n = ::read(file.fd.get(), magic + got, sizeof magic - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  return got == sizeof magic && std::memcmp(magic, kPackageMagic, sizeof magic) == 0;
}

}  // namespace svod
