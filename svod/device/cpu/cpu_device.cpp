#include "svod/device/cpu/cpu_device.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>

#include "svod/base/error.h"
#include "svod/base/log.h"
#include "svod/base/subprocess.h"
#include "svod/base/thread_pool.h"
#include "svod/cache/cache_key.h"
#include "svod/cache/object_cache.h"
#include "svod/loader/elf_loader.h"
#include "svod/loader/shared_library.h"
#include "svod/program/cpu_abi.h"

namespace svod {

CpuProgram::CpuProgram(CpuDevice& device, ProgramSpec spec, std::shared_ptr<const void> owner, void* entry)
    : Program(std::move(spec)), device_(&device), owner_(std::move(owner)), entry_(entry), layout_(this->spec()) {
  if (abi_arg_count() > kMaxKernelArgs)
    throw make_error(ErrorKind::Unsupported, "program \"{}\" has {} parameters; the CPU ABI takes at most {}",
                     this->spec().display_name(), abi_arg_count(), kMaxKernelArgs);
}

Device& CpuProgram::device() const noexcept { return *device_; }

void CpuProgram::launch(std::span<const Buffer> buffers, std::span<const int64_t> scalars,
                        const LaunchDims* dims) const {
  const size_t nbuf = layout_.buffer_count();
  if (buffers.size() != nbuf) [[unlikely]]
    throw make_error(ErrorKind::Validation, "program \"{}\" takes {} buffers, got {}", spec().display_name(), nbuf,
                     buffers.size());
  uint64_t args[kMaxKernelArgs];
  int64_t* abi_scalars = reinterpret_cast<int64_t*>(args + nbuf);
  layout_.fill_scalars(scalars, abi_scalars);
  for (size_t i = 0; i < nbuf; ++i) {
    const Buffer& b = buffers[i];
    void* host = b.valid() ? b.storage().host_data() : nullptr;
    if (host == nullptr) [[unlikely]]
      throw make_error(ErrorKind::Validation, "program \"{}\": buffer {} (\"{}\") is {}", spec().display_name(), i,
                       spec().buffers[i].name, b.valid() ? "not in host memory" : "empty");
    if (auto need = layout_.min_bytes(i, abi_scalars); need && b.bytes() < *need) [[unlikely]]
      throw make_error(ErrorKind::Validation, "program \"{}\": buffer {} (\"{}\") holds {} bytes but the launch needs {}",
                       spec().display_name(), i, spec().buffers[i].name, b.bytes(), *need);
    args[i] = reinterpret_cast<uint64_t>(static_cast<std::byte*>(host) + b.byte_offset());
  }
  if (dims && dims->global[0] < 1) [[unlikely]]
    throw make_error(ErrorKind::Validation, "program \"{}\": {} core_id slices; a launch needs at least 1",
                     spec().display_name(), dims->global[0]);
  run(args, dims ? dims->global[0] : layout_.global_size(0, abi_scalars));
}

namespace {

// SVOD_DEBUG, read once when the library loads so that a launch pays one
// predictable branch for it and nothing else.
const int launch_debug_level = debug_level();

void run_slices(const CpuProgram& program, const uint64_t* args, int64_t slices) {
  const size_t n = program.abi_arg_count();
  if (slices <= 1) {
    call_kernel(program.entry(), args, n);
    return;
  }
  const auto core = program.layout().core_id();
  if (!core) [[unlikely]]
    throw make_error(ErrorKind::Validation,
                     "program \"{}\": global_size[0] = {} needs a core_id scalar to split the work across cores",
                     program.spec().display_name(), slices);
  const size_t core_slot = program.layout().buffer_count() + *core;
  parallel_for(static_cast<size_t>(slices), [&](size_t slice) {
    uint64_t local[kMaxKernelArgs];
    std::memcpy(local, args, n * sizeof(uint64_t));
    local[core_slot] = slice;
    call_kernel(program.entry(), local, n);
  });
}

// The program's bytes expression over this launch's ABI scalars; nullopt when
// it names anything else (a plan variable) or there is none.
std::optional<double> launch_bytes(const CpuProgram& program, const uint64_t* args) {
  const ProgramSpec& spec = program.spec();
  if (!spec.bytes) return std::nullopt;
  std::vector<int64_t> values;
  for (const auto& name : spec.bytes->variables()) {
    auto it = std::find_if(spec.scalars.begin(), spec.scalars.end(), [&](const auto& s) { return s.name == name; });
    if (it == spec.scalars.end()) return std::nullopt;
    const size_t slot = program.layout().buffer_count() + static_cast<size_t>(it - spec.scalars.begin());
    values.push_back(static_cast<int64_t>(args[slot]));
  }
  try {
    return static_cast<double>(spec.bytes->evaluate(values));
  } catch (const Error&) {
    return std::nullopt;
  }
}

// Out of line and cold so that run() stays a compare and a jump when
// launches are not logged.
[[gnu::noinline, gnu::cold]] void run_logged(const CpuProgram& program, const uint64_t* args, int64_t slices) {
  const auto start = std::chrono::steady_clock::now();
  run_slices(program, args, slices);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  const auto bytes = launch_bytes(program, args);
  logger().info("launch {} on CPU, {} slice{}: {:.1f} us{}", program.spec().display_name(), slices,
                slices == 1 ? "" : "s", us, bytes && us > 0 ? fmt::format(", {:.2f} GB/s", *bytes / (us * 1e3)) : "");
}

// Level 4: the loaded code as llvm-objdump sees it, fed on stdin.
void log_disassembly(const ProgramSpec& spec, const std::vector<std::byte>& image) {
  std::optional<std::string> objdump = find_executable("llvm-objdump-19");
  if (!objdump) objdump = find_executable("llvm-objdump");
  if (!objdump) {
    logger().info("disassembly of {}: no llvm-objdump-19 or llvm-objdump in PATH", spec.display_name());
    return;
  }
  const std::string_view bytes(reinterpret_cast<const char*>(image.data()), image.size());
  const ProcessResult r = run_process({*objdump, "-d", "-"}, bytes, std::chrono::seconds(30));
  if (!r.ok()) {
    logger().info("disassembly of {}: {} failed: {}", spec.display_name(), *objdump, r.err);
    return;
  }
  logger().info("disassembly of {}:\n{}", spec.display_name(), r.out);
}

}  // namespace

void CpuProgram::run_bound(const uint64_t* args, int64_t slices) const {
  if (launch_debug_level >= 2) [[unlikely]] {
    run_logged(*this, args, slices);
    return;
  }
  run_slices(*this, args, slices);
}

CpuDevice::CpuDevice(std::shared_ptr<const Compiler> compiler) : compiler_(std::move(compiler)) {}

Buffer CpuDevice::allocate(DType dtype, size_t count) {
  const size_t elem = size_of(dtype);
  if (count > SIZE_MAX / elem)
    throw make_error(ErrorKind::Validation, "buffer of {} {} elements is too large", count, to_string(dtype));
  return Buffer(std::make_shared<HostStorage>(*this, count * elem), dtype);
}

std::shared_ptr<const Program> CpuDevice::compile(const ProgramSpec& spec) {
  // In memory first (this device and the whole spec, no toolchain probe),
  // then compiled objects on disk, then the compiler.
  return kernel_cache().get_or_build(kernel_key(cache_scope_, spec), [&] {
    const std::shared_ptr<ObjectCache> objects = object_cache();
    return load_or_compile(objects.get(), *compiler_, spec,
                           [&](const Artifact& artifact) -> std::shared_ptr<const Program> { return load(spec, artifact); });
  });
}

std::shared_ptr<const CpuProgram> CpuDevice::load(const ProgramSpec& spec, const Artifact& artifact) {
  spec.validate();
  if (launch_debug_level >= 4) [[unlikely]]
    log_disassembly(spec, artifact.bytes);
  if (artifact.kind == ArtifactKind::ElfObject) {
    auto image = LoadedImage::load(artifact.bytes);
    void* entry = image->symbol(spec.entry);
    return std::make_shared<CpuProgram>(*this, spec, std::move(image), entry);
  }
  if (artifact.kind == ArtifactKind::SharedLibrary) {
    auto library = SharedLibrary::open_image(artifact.bytes, spec.entry);
    void* entry = library->symbol(spec.entry);
    return std::make_shared<CpuProgram>(*this, spec, std::move(library), entry);
  }
  throw make_error(ErrorKind::Unsupported, "program \"{}\": the CPU device loads ELF objects and shared libraries",
                   spec.display_name());
}

std::shared_ptr<const CpuProgram> CpuDevice::load_library(const ProgramSpec& spec, const std::filesystem::path& library) {
  // The spec is checked as if its source were the library: everything else
  // about it (entry, parameters, launch sizes) must be as valid as for a
  // compiled program.
  ProgramSpec checked = spec;
  if (checked.source.empty()) checked.source = library.string();
  checked.validate();
  auto opened = SharedLibrary::open(library);
  void* entry = opened->symbol(spec.entry);
  return std::make_shared<CpuProgram>(*this, spec, std::move(opened), entry);
}

void CpuDevice::copy(const Buffer& dst, const Buffer& src) {
  if (dst.bytes() != src.bytes())
    throw make_error(ErrorKind::Validation, "copy of {} bytes into a buffer of {} bytes: sizes must be equal", src.bytes(),
                     dst.bytes());
  std::memmove(dst.data(), src.data(), src.bytes());
}

std::shared_ptr<CpuDevice> create_cpu_device_with_backend(CpuBackend backend) {
  static std::mutex mutex;
  static std::shared_ptr<CpuDevice> devices[3];
  std::lock_guard lock(mutex);
  auto& device = devices[static_cast<size_t>(backend)];
  if (!device) device = std::make_shared<CpuDevice>(cpu_compiler(backend));
  return device;
}

std::shared_ptr<CpuDevice> create_cpu_device() { return create_cpu_device_with_backend(default_cpu_backend().backend); }

}  // namespace svod
