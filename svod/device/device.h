// Device and Program: the contract every device keeps.
//
// A Device allocates buffers, names the languages it runs and the compiler
// that turns them into artifacts, loads artifacts into Programs, and copies.
// Compiling is the same for every device and lives here, once: the kernel
// cache in memory, then the object cache on disk, then the device's
// compiler, then the device's load (Device::compile). A Program is one
// loaded kernel, callable many times and from many threads at once.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "svod/compile/compiler.h"
#include "svod/device/buffer.h"
#include "svod/device/queue.h"
#include "svod/program/launch_layout.h"
#include "svod/program/program_spec.h"

namespace svod {

class BlockCache;
class Program;

// Devices whose storages free through the device's own state (a driver
// context) call free_cached() first thing in their destructors, so that no
// cached block outlives that state.
class Device {
 public:
  Device();
  virtual ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  virtual std::string name() const = 0;  // "CPU", "CUDA:0", "CL:0"
  virtual Buffer allocate(DType dtype, size_t count) = 0;
  // A buffer whose memory goes back to this device's block cache when its
  // last reference goes, and is reused by a later allocate_cached of the same
  // byte size (block_cache.h). Its contents are undefined, not zero-filled.
  Buffer allocate_cached(DType dtype, size_t count);
  // Gives the blocks this device holds for reuse back (free_cached_blocks()
  // does it for every device). Never throws: devices call it from their
  // destructors.
  void free_cached() noexcept;
  // Host memory that this device copies to and from fastest (pinned memory
  // on CUDA); plain host memory by default. For staging and for results read
  // back on the host.
  virtual Buffer allocate_host(DType dtype, size_t count);
  // allocate_host's memory from a block cache, as allocate_cached is the
  // device's (contents undefined): staging buffers used over and over.
  Buffer allocate_host_cached(DType dtype, size_t count);
  // True when this device's buffers are host memory, so that any host
  // memory (a mapped file, a caller's array) can serve as one of its buffers.
  virtual bool memory_is_host() const noexcept { return false; }

  // The languages this device runs, its own first (C for the CPU, OpenCL C,
  // CUDA C); empty for a device that runs no kernels.
  virtual std::span<const Language> languages() const noexcept = 0;
  bool accepts(Language language) const noexcept;
  // languages() for messages: "c, llvm"; empty when it runs none.
  std::string language_names() const;
  // The compiler that turns this device's languages into artifacts it loads.
  // Error(DeviceUnavailable) when it is missing here (NVRTC not installed),
  // Error(Unsupported) for a device that compiles nothing.
  virtual const Compiler& compiler() const = 0;
  // Loads an artifact made by a compiler of this device's kind (here, from
  // the object cache or from a package) into a Program. Error(Load) when the
  // device refuses it, Error(UndefinedSymbol) when the entry is missing.
  virtual std::shared_ptr<const Program> load(const ProgramSpec& spec, const Artifact& artifact) = 0;
  // Why artifacts made by the compiler `made_by` cannot load on this device;
  // empty when they can. By default they can when `made_by` equals this
  // device's compiler identity in every field.
  virtual std::string artifact_mismatch(const CompilerIdentity& made_by) const;

  // Compiles and loads a kernel: the kernel cache (this device and the whole
  // spec), else the object cache on disk, else compiler() — then load().
  // Error(Unsupported) for a language the device does not run; Compile,
  // Load and Validation errors as the compiler and load() throw them.
  std::shared_ptr<const Program> compile(const ProgramSpec& spec);
  // What compile() checks before it compiles: the language, the spec
  // (ProgramSpec::validate), the recipe it names (Compiler::check_recipe)
  // and what this device cannot run (check_spec).
  void check_compilable(const ProgramSpec& spec) const;

  // Copies src into dst (equal byte sizes). Either may live on this device or
  // on the host.
  virtual void copy(const Buffer& dst, const Buffer& src) = 0;
  // Waits for all work submitted to this device.
  virtual void synchronize() {}

  // The queue this device's launches and direct copies go to (queue.h). The
  // default is a HostQueue: work runs on the calling thread.
  virtual Queue& queue() { return *host_queue_; }
  // True when queue().copy(dst, src) moves the bytes in one command of this
  // device (between host memory and this device, or within its memory);
  // other copies go through copy(), which may stage them.
  virtual bool direct_copy(const Buffer& dst, const Buffer& src) const noexcept;
  // Optional whole-graph submission: runs `kernels` (programs of this
  // device, each after its `after` list) as one submission and waits for
  // it. Returns false, running nothing, where the device has no such path.
  virtual bool submit_graph(std::span<const KernelLaunch> kernels);

 protected:
  // Checks a spec beyond what ProgramSpec::validate does, before anything is
  // compiled: what this device cannot run (core_id on a GPU-style device).
  virtual void check_spec(const ProgramSpec& spec) const;

 private:
  std::unique_ptr<HostQueue> host_queue_;
  // Made on first use: of device memory, and of host memory for staging.
  BlockCache& block_cache();
  BlockCache& host_block_cache();
  std::once_flag block_cache_once_, host_block_cache_once_;
  std::shared_ptr<BlockCache> block_cache_, host_block_cache_;
  // Set once each is made, for free_cached(), which empties only those.
  std::atomic<BlockCache*> block_cache_made_{nullptr}, host_block_cache_made_{nullptr};
  // This device's key space in the process-wide kernel cache.
  const uint64_t cache_scope_;
};

// The artifact a Program was loaded from and the compiler that made it.
struct LoadedArtifact {
  Artifact artifact;  // its kind and bytes (no diagnostics)
  // The identity of the compiler that made it; nullopt when it is the
  // program's device's own compiler (Device::compiler()), which is asked
  // only when someone needs it, so that a program loaded from the object
  // cache never opens its compiler.
  std::optional<CompilerIdentity> made_by;
};

class Program {
 public:
  explicit Program(ProgramSpec spec);
  virtual ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  const ProgramSpec& spec() const noexcept { return spec_; }
  // How the spec's parameters become the kernel's arguments and launch sizes.
  const LaunchLayout& layout() const noexcept { return layout_; }
  virtual Device& device() const noexcept = 0;

  // Runs the kernel on `args` to completion: the one launch of every device
  // (queues submit without waiting). Counts, dtypes, sizes, devices and
  // bounds (core_id's against the slice count included) are checked before
  // anything runs.
  virtual void launch(const LaunchArgs& args) const = 0;
  void launch(std::span<const Buffer> buffers, std::span<const int64_t> scalars = {},
              const LaunchDims* dims = nullptr) const {
    launch(LaunchArgs{buffers, scalars, dims});
  }

  // Runs the kernel once, like launch(), and returns how long it ran: by the
  // device's own events where it has them (OpenCL, CUDA), else by the host's
  // monotonic clock around launch(). For benchmarks and tuning.
  virtual std::chrono::nanoseconds time_launch(const LaunchArgs& args) const;

  // The pre-bound host path, for programs that run on the calling thread
  // with the CPU ABI (cpu_abi.h): a caller that checked everything once (a
  // plan, the Python binding) keeps the argument words (buffer addresses,
  // then every ABI scalar) and calls run_bound(args, slices) with no further
  // checks.
  virtual bool binds_host_arguments() const noexcept { return false; }
  // Error(Unsupported) unless binds_host_arguments().
  virtual void run_bound(const uint64_t* args, int64_t slices) const;
  // The loaded entry point of a program that binds host arguments (for
  // callers that call it themselves, e.g. through ctypes); null otherwise.
  virtual void* host_entry() const noexcept { return nullptr; }

  // The artifact this program was loaded from (load_program), so that a plan
  // holding it packs without compiling again; null for a program made some
  // other way. Its bytes stay in memory as long as the program: a CPU
  // program's ELF object, a few KiB per kernel.
  const std::shared_ptr<const LoadedArtifact>& artifact() const noexcept { return artifact_; }

 private:
  friend std::shared_ptr<const Program> load_program(Device& device, const ProgramSpec& spec, Artifact artifact,
                                                     std::optional<CompilerIdentity> made_by);
  ProgramSpec spec_;
  LaunchLayout layout_;
  // Set once by load_program, before the program is handed to anyone.
  mutable std::shared_ptr<const LoadedArtifact> artifact_;
};

// device.load(spec, artifact), the program keeping the artifact
// (Program::artifact) with the identity of the compiler that made it
// (nullopt: the device's own). Every Program made from an artifact is made
// here: by the compile pipeline (load_or_compile), from packages and from
// program binaries.
std::shared_ptr<const Program> load_program(Device& device, const ProgramSpec& spec, Artifact artifact,
                                            std::optional<CompilerIdentity> made_by = std::nullopt);

// Builds a Program for `spec` on `device` without the kernel cache: a stored
// object from the object cache is loaded with device.load(); otherwise the
// device's compiler compiles, the device loads, and the object is published.
// A stored object that fails to load is removed and compiled afresh. The
// program keeps the artifact it was loaded from (Program::artifact).
std::shared_ptr<const Program> load_or_compile(Device& device, const ProgramSpec& spec);

// How svod copies a buffer, decided here once:
// dst <- src (equal byte sizes) now, on the calling thread, wherever either
// lives: a memmove when both are host memory, else the copy() of the side
// that is not host memory (dst's when neither is), which stages what no
// single command of it does.
void copy_buffer(const Buffer& dst, const Buffer& src);
// The device whose queue moves dst <- src in one command (Device::
// direct_copy; dst's device first), or null when only copy_buffer() can.
Device* direct_copy_device(const Buffer& dst, const Buffer& src) noexcept;

// dst <- src (equal byte sizes) for copies no single command of a device
// does (between devices, or overlapping bytes of one device storage): a
// memmove when both are host memory, else through a host buffer, each leg
// copied by the device that owns that side.
void copy_through_host(const Buffer& dst, const Buffer& src);

// For devices that pass buffers by handle (OpenCL, CUDA): checks buffer
// `index` of a launch of `spec` — that it is not empty, has the declared
// dtype (LaunchLayout::check_dtype) and holds what the launch needs for
// these ABI scalars. Error(Validation) naming the program
// and the buffer.
void check_launch_buffer(const ProgramSpec& spec, const LaunchLayout& layout, size_t index, const Buffer& buffer,
                         const int64_t* abi);

}  // namespace svod
