// The CPU device: host buffers, kernels compiled from C or LLVM IR by one of
// the CPU compilers (cpu_compiler.h) and loaded by svod's ELF loader (objects)
// or dlopen (shared libraries), and launches that fan core_id slices out over
// the thread pool.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "svod/program/slice_schedule.h"
#include "svod/compile/compiler.h"
#include "svod/compile/cpu_compiler.h"
#include "svod/device/device.h"
#include "svod/device/device_kind.h"
#include "svod/program/launch_layout.h"

namespace svod {

class CpuDevice;
class LoadedImage;
class SharedLibrary;

class CpuProgram final : public Program {
 public:
  // `entry` lies in the code of `image` (or `library`), which the program
  // keeps mapped for as long as it lives. `device` is the device the program
  // belongs to: the CPU device, or any device whose kernels run on the host
  // with the CPU ABI.
  CpuProgram(Device& device, ProgramSpec spec, std::shared_ptr<const LoadedImage> image, void* entry);
  CpuProgram(Device& device, ProgramSpec spec, std::shared_ptr<const SharedLibrary> library, void* entry);

  Device& device() const noexcept override;
  using Program::launch;
  void launch(const LaunchArgs& call) const override;
  bool binds_host_arguments() const noexcept override { return true; }
  void run_bound(const uint64_t* args, int64_t slices) const override;
  void* host_entry() const noexcept override { return entry_; }

  void* entry() const noexcept { return entry_; }
  size_t abi_arg_count() const noexcept { return layout().buffer_count() + layout().scalar_count(); }

  // Runs already-checked ABI arguments (buffer addresses, then every ABI
  // scalar) as `slices` core_id slices in parallel (one call when slices is 1):
  // run_bound without the virtual call, for callers that know the type.
  void run(const uint64_t* args, int64_t slices) const { CpuProgram::run_bound(args, slices); }

  // Whether a launch of several slices spreads them over the pool (slice_schedule.h).
  SliceSchedule& slice_schedule() const noexcept { return schedule_; }

  // Whether `address` is in the program's own machine code. Read by the fault
  // handler: no allocation, no lock, nothing that changes after construction.
  bool owns_code(uintptr_t address) const noexcept {
    for (const auto& r : code_)
      if (address - reinterpret_cast<uintptr_t>(r.data()) < r.size()) return true;
    return false;
  }

 private:
  CpuProgram(Device& device, ProgramSpec spec, std::shared_ptr<const void> owner, void* entry,
             std::vector<std::span<const std::byte>> code);
  // Checked mode (memory): every buffer argument that is not a whole guarded
  // buffer (numpy arrays, DLPack tensors, wrapped memory, views, buffers made
  // before checked mode) runs on a guarded copy for this launch, copied back
  // when the kernel writes it and the launch succeeded; then the canary
  // around every guarded argument is checked, so a write just outside any
  // argument fails the launch naming the buffer and element.
  [[gnu::noinline, gnu::cold]] void launch_staged(std::span<const Buffer> buffers, uint64_t* args,
                                                  int64_t slices) const;

  Device* device_;
  std::shared_ptr<const void> owner_;
  uint64_t code_tag_;  // names the program to the fault handler (note_launched)
  void* entry_;
  std::vector<std::span<const std::byte>> code_;
  mutable SliceSchedule schedule_;
};

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(std::shared_ptr<const Compiler> compiler);

  std::string name() const override { return "CPU"; }
  Buffer allocate(DType dtype, size_t count) override;
  bool memory_is_host() const noexcept override { return true; }
  void copy(const Buffer& dst, const Buffer& src) override;

  // C and LLVM IR.
  std::span<const Language> languages() const noexcept override;
  const Compiler& compiler() const override { return *compiler_; }
  // Loads an artifact compiled by a CPU compiler: an ELF object through
  // svod's loader, a shared library through dlopen.
  std::shared_ptr<const Program> load(const ProgramSpec& spec, const Artifact& artifact) override;
  // Objects run here when they were made for this machine's architecture and
  // svod's object ABI with no CPU feature this CPU lacks, whichever CPU
  // compiler made them.
  std::string artifact_mismatch(const CompilerIdentity& made_by) const override;

  // Opens a shared library built elsewhere and binds spec.entry in it;
  // spec.source may be empty (it is not compiled). Not cached: each call
  // returns a new program, and the library closes with the last of them.
  std::shared_ptr<const CpuProgram> load_library(const ProgramSpec& spec, const std::filesystem::path& library);

 private:
  std::shared_ptr<const Compiler> compiler_;
};

// The process's CPU device for `compiler`, made on first use (one per
// compiler). Throws Error(DeviceUnavailable) when the compiler cannot work
// here.
std::shared_ptr<CpuDevice> cpu_device(CpuCompiler compiler);
// The process's CPU device for default_cpu_compiler().
std::shared_ptr<CpuDevice> cpu_device();

// The "CPU" kind for the device registry; its compiler choices are the CPU
// compilers (clang, llvm, dlopen).
DeviceKind cpu_device_kind();

}  // namespace svod
