// The CPU device: host buffers, kernels compiled from C or LLVM IR by one of
// the CPU backends (cpu_backend.h) and loaded by svod's ELF loader (objects)
// or dlopen (shared libraries), and launches that fan core_id slices out over
// the thread pool.
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <string>

#include "svod/cache/kernel_cache.h"
#include "svod/compile/compiler.h"
#include "svod/device/cpu/cpu_backend.h"
#include "svod/device/device.h"
#include "svod/program/launch_layout.h"

namespace svod {

class CpuDevice;

class CpuProgram final : public Program {
 public:
  // `entry` lies in code that `owner` keeps mapped (a LoadedImage or a
  // SharedLibrary); the program holds it for as long as it lives.
  CpuProgram(CpuDevice& device, ProgramSpec spec, std::shared_ptr<const void> owner, void* entry);

  Device& device() const noexcept override;
  void launch(std::span<const Buffer> buffers, std::span<const int64_t> scalars,
              const LaunchDims* dims = nullptr) const override;
  bool binds_host_arguments() const noexcept override { return true; }
  void run_bound(const uint64_t* args, int64_t slices) const override;

  const LaunchLayout& layout() const noexcept { return layout_; }
  void* entry() const noexcept { return entry_; }
  size_t abi_arg_count() const noexcept { return layout_.buffer_count() + layout_.scalar_count(); }

  // Runs already-checked ABI arguments (buffer addresses, then every ABI
  // scalar) as `slices` core_id slices in parallel (one call when slices is 1):
  // run_bound without the virtual call, for callers that know the type.
  void run(const uint64_t* args, int64_t slices) const { CpuProgram::run_bound(args, slices); }

 private:
  CpuDevice* device_;
  std::shared_ptr<const void> owner_;
  void* entry_;
  LaunchLayout layout_;
};

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(std::shared_ptr<const Compiler> compiler);

  std::string name() const override { return "CPU"; }
  Buffer allocate(DType dtype, size_t count) override;
  std::shared_ptr<const Program> compile(const ProgramSpec& spec) override;
  void copy(const Buffer& dst, const Buffer& src) override;

  // Loads an artifact compiled elsewhere (by this device's compiler
  // identity): an ELF object through svod's loader, a shared library through
  // dlopen.
  std::shared_ptr<const CpuProgram> load(const ProgramSpec& spec, const Artifact& artifact);
  // Opens a shared library built elsewhere and binds spec.entry in it;
  // spec.source may be empty (it is not compiled). Not cached: each call
  // returns a new program, and the library closes with the last of them.
  std::shared_ptr<const CpuProgram> load_library(const ProgramSpec& spec, const std::filesystem::path& library);
  const Compiler& compiler() const noexcept { return *compiler_; }

 private:
  std::shared_ptr<const Compiler> compiler_;
  // This device's key space in the process-wide kernel cache.
  const uint64_t cache_scope_ = new_cache_scope();
};

// The process's CPU device for `backend`, created on first use (one per
// backend). Throws Error(DeviceUnavailable) when the backend cannot work here.
std::shared_ptr<CpuDevice> create_cpu_device_with_backend(CpuBackend backend);
// The process's CPU device for default_cpu_backend().
std::shared_ptr<CpuDevice> create_cpu_device();

}  // namespace svod
