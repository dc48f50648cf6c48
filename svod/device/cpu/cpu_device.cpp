#include "svod/device/cpu/cpu_device.h"

#include <cstring>
#include <mutex>

#include "svod/base/error.h"
#include "svod/base/log.h"
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

void CpuProgram::launch(std::span<const Buffer> buffers, std::span<const int64_t> scalars) const {
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
  run(args, layout_.global_size(0, abi_scalars));
}

void CpuProgram::run(const uint64_t* args, int64_t slices) const {
  const size_t n = abi_arg_count();
  if (slices <= 1) {
    call_kernel(entry_, args, n);
    return;
  }
  const auto core = layout_.core_id();
  if (!core) [[unlikely]]
    throw make_error(ErrorKind::Validation,
                     "program \"{}\": global_size[0] = {} needs a core_id scalar to split the work across cores",
                     spec().display_name(), slices);
  const size_t core_slot = layout_.buffer_count() + *core;
  parallel_for(static_cast<size_t>(slices), [&](size_t slice) {
    uint64_t local[kMaxKernelArgs];
    std::memcpy(local, args, n * sizeof(uint64_t));
    local[core_slot] = slice;
    call_kernel(entry_, local, n);
  });
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
