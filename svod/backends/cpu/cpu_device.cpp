#include "svod/backends/cpu/cpu_device.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>

#include "svod/backends/cpu/kernel_fault.h"
#include "svod/base/cpu_features.h"
#include "svod/base/error.h"
#include "svod/base/log.h"
#include "svod/base/subprocess.h"
#include "svod/base/thread_pool.h"
#include "svod/base/thread_pool_start.h"
#include "svod/guard/checked_mode.h"
#include "svod/guard/guarded_memory.h"
#include "svod/guard/op_deadline.h"
#include "svod/guard/op_name.h"
#include "svod/loader/elf_loader.h"
#include "svod/loader/shared_library.h"
#include "svod/program/cpu_abi.h"

namespace svod {
namespace {

// SVOD_DEBUG, read once when the library loads.
const int launch_debug_level = debug_level();
// Launches take the slow path (run_watched) when they are logged (SVOD_DEBUG
// >= 2) or watched (SVOD_OP_TIMEOUT, read when the first program is made): a
// launch pays one predictable branch for both and nothing else.
std::atomic<bool> slow_launches{launch_debug_level >= 2};

}  // namespace

namespace {

std::vector<std::span<const std::byte>> code_regions(const LoadedImage& image) {
  std::vector<std::span<const std::byte>> code;
  for (const MappedRegion& r : image.regions())
    if (r.access == RegionAccess::ReadExecute) code.emplace_back(r.address, r.size);
  return code;
}

}  // namespace

CpuProgram::CpuProgram(Device& device, ProgramSpec spec, std::shared_ptr<const LoadedImage> image, void* entry)
    : CpuProgram(device, std::move(spec), image, entry, code_regions(*image)) {}

CpuProgram::CpuProgram(Device& device, ProgramSpec spec, std::shared_ptr<const SharedLibrary> library, void* entry)
    : CpuProgram(device, std::move(spec), library, entry, library->code_segments()) {}

CpuProgram::CpuProgram(Device& device, ProgramSpec spec, std::shared_ptr<const void> owner, void* entry,
                       std::vector<std::span<const std::byte>> code)
    : Program(std::move(spec)),
      device_(&device),
      owner_(register_kernel_code(std::move(owner), code, this->spec().display_name())),
      code_tag_(registered_code_tag(owner_)),
      entry_(entry),
      code_(std::move(code)) {
  if (abi_arg_count() > kMaxKernelArgs)
    throw make_error(ErrorKind::Unsupported, "program \"{}\" has {} parameters; the CPU ABI takes at most {}",
                     this->spec().display_name(), abi_arg_count(), kMaxKernelArgs);
  ensure_fault_reporting();
  // The thread that makes a program likely launches it: it is set up for
  // kernels now (its alternate signal stack, its registration for stop
  // signals), and the pool's workers in the background, which a package's
  // first call would otherwise wait for (0.1-0.2 ms).
  detail::prepare_thread_for_kernels();
  join_thread_pool();
  if (op_timeout_seconds() > 0) slow_launches.store(true, std::memory_order_relaxed);
  (void)check_mode();  // reads SVOD_CHECK, so that memory_checked() sees it
}

Device& CpuProgram::device() const noexcept { return *device_; }

void CpuProgram::launch(const LaunchArgs& call) const {
  const auto& [buffers, scalars, dims] = call;
  const size_t nbuf = layout().buffer_count();
  if (buffers.size() != nbuf) [[unlikely]]
    throw make_error(ErrorKind::Validation, "program \"{}\" takes {} buffers, got {}", spec().display_name(), nbuf,
                     buffers.size());
  uint64_t args[kMaxKernelArgs];
  int64_t* abi_scalars = reinterpret_cast<int64_t*>(args + nbuf);
  layout().fill_scalars(scalars, abi_scalars);
  for (size_t i = 0; i < nbuf; ++i) {
    const Buffer& b = buffers[i];
    void* host = b.valid() ? b.storage().host_data() : nullptr;
    if (host == nullptr) [[unlikely]]
      throw make_error(ErrorKind::Validation, "program \"{}\": buffer {} (\"{}\") is {}", spec().display_name(), i,
                       spec().buffers[i].name, b.valid() ? "not in host memory" : "empty");
    args[i] = reinterpret_cast<uint64_t>(static_cast<std::byte*>(host) + b.byte_offset());
    layout().check_dtype(i, b.dtype(), args[i]);
    if (b.storage().read_only() && writes(spec().buffers[i].access)) [[unlikely]]
      check_writable(b, fmt::format("program \"{}\": buffer {} (\"{}\")", spec().display_name(), i,
                                    spec().buffers[i].name));
    if (auto need = layout().min_bytes(i, abi_scalars); need && b.bytes() < *need) [[unlikely]]
      throw make_error(ErrorKind::Validation, "program \"{}\": buffer {} (\"{}\") holds {} bytes but the launch needs {}",
                       spec().display_name(), i, spec().buffers[i].name, b.bytes(), *need);
  }
  int64_t slices;
  if (dims != nullptr) {
    slices = layout().host_slices(dims->global);
  } else {
    slices = layout().global_size(0, abi_scalars);
    layout().check_slices(slices);
  }
  if (memory_checked()) [[unlikely]] {
    launch_staged(buffers, args, slices);
    return;
  }
  run(args, slices);
}

namespace {

// "f32[1024]" for a buffer argument.
std::string describe_buffer(const Buffer& b) { return fmt::format("{}[{}]", to_string(b.dtype()), b.count()); }

// A guarded copy of one buffer argument for one launch.
struct StagedArgument {
  void* copy = nullptr;
  size_t bytes = 0;
  ~StagedArgument() {
    if (copy != nullptr) free_guarded(copy, bytes, Guards::Around);
  }
};

// Whether [a, a + an) and [b, b + bn) share a byte.
bool overlap(uint64_t a, size_t an, uint64_t b, size_t bn) { return a < b + bn && b < a + an; }

}  // namespace

void CpuProgram::launch_staged(std::span<const Buffer> buffers, uint64_t* args, int64_t slices) const {
  const size_t n = buffers.size();
  std::vector<StagedArgument> staged(n);
  std::vector<size_t> same_as(n);  // the argument whose copy argument i uses (itself when it has its own)
  for (size_t i = 0; i < n; ++i) {
    same_as[i] = i;
    const Buffer& b = buffers[i];
    const bool whole_guarded = b.storage().guarded() && b.byte_offset() == 0 && b.bytes() == b.storage().bytes();
    if (whole_guarded || b.bytes() == 0) continue;  // its own guards
    // Arguments over the same bytes share one copy (an in-place kernel); one
    // that partly overlaps another runs on the memory itself (not checked).
    bool shared = false, partial = false;
    for (size_t j = 0; j < n; ++j) {
      if (j == i || !overlap(reinterpret_cast<uint64_t>(buffers[j].data()), buffers[j].bytes(),
                             reinterpret_cast<uint64_t>(b.data()), b.bytes()))
        continue;
      if (buffers[j].data() == b.data() && buffers[j].bytes() == b.bytes()) {
        if (j < i) {
          same_as[i] = same_as[j];
          shared = true;
        }
      } else {
        partial = true;
      }
    }
    if (partial) continue;
    if (shared) {
      args[i] = args[same_as[i]];
      continue;
    }
    staged[i].copy = allocate_guarded(b.bytes(), Guards::Around);
    staged[i].bytes = b.bytes();
    std::memcpy(staged[i].copy, b.data(), b.bytes());
    args[i] = reinterpret_cast<uint64_t>(staged[i].copy);
  }
  run(args, slices);  // a fault leaves every staged argument's memory as it was
  for (size_t i = 0; i < n; ++i) {
    const Buffer& b = buffers[i];
    const StagedArgument& own = staged[same_as[i]];
    const void* data = own.copy != nullptr ? own.copy : b.storage().guarded() ? b.data() : nullptr;
    if (data == nullptr || same_as[i] != i) continue;
    if (const auto at = first_gap_change(data, b.bytes(), Guards::Around))
      throw make_error(ErrorKind::Execution,
                       "program \"{}\": checked mode: the kernel wrote just outside buffer {} (\"{}\", {}), at element {} "
                       "(byte offset {}): the canary there changed; the launch failed{}",
                       spec().display_name(), i, spec().buffers[i].name, describe_buffer(b),
                       element_at(*at, size_of(b.dtype())), *at,
                       own.copy != nullptr ? " and the buffer was left as it was" : "");
  }
  // A copy goes back when any argument over it is written.
  std::vector<char> written(n, 0);
  for (size_t i = 0; i < n; ++i) written[same_as[i]] |= writes(spec().buffers[i].access);
  for (size_t i = 0; i < n; ++i)
    if (staged[i].copy != nullptr && written[i]) std::memcpy(buffers[i].data(), staged[i].copy, buffers[i].bytes());
}

namespace {

// Several core_id slices: spread over the pool or one after another on the
// calling thread, as the program's SliceSchedule says. Out of line: it costs
// microseconds, and the one-slice path stays small.
[[gnu::noinline]] void run_several_slices(const CpuProgram& program, const uint64_t* args, int64_t slices) {
  const size_t n = program.abi_arg_count();
  const auto core = program.layout().core_id();
  if (!core) [[unlikely]]
    program.layout().check_slices(slices);  // throws: more than one slice needs a core_id
  const size_t core_slot = program.layout().buffer_count() + *core;
  const RunningOp* op = running_op;  // the slices run on other threads
  const StopScope* stop = launch_stop_scope();
  const auto run_slice = [&](size_t slice) {
    uint64_t local[kMaxKernelArgs];
    std::memcpy(local, args, n * sizeof(uint64_t));
    local[core_slot] = slice;
    KernelFrame frame(&program, local, static_cast<int64_t>(slice), op, stop);
    run_kernel(frame, program.entry(), n);
  };
  SliceSchedule& schedule = program.slice_schedule();
  const SliceSchedule::Choice choice = schedule.next();
  const auto start = std::chrono::steady_clock::now();
  if (choice.spread) {
    parallel_for(static_cast<size_t>(slices), run_slice);
  } else {
    for (size_t slice = 0; slice < static_cast<size_t>(slices); ++slice) run_slice(slice);
  }
  schedule.record(choice, std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
}

// Inlined into run_bound, as before the stop scopes made it larger (three
// instructions a launch, by callgrind).
[[gnu::always_inline]] inline void run_slices(const CpuProgram& program, const uint64_t* args, int64_t slices) {
  if (slices <= 1) {
    KernelFrame frame(&program, args, running_op);
    run_kernel(frame, program.entry(), program.abi_arg_count());
    return;
  }
  run_several_slices(program, args, slices);
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
  log_debug("launch {} on CPU, {} slice{}: {:.1f} us{}", program.spec().display_name(), slices,
                slices == 1 ? "" : "s", us, bytes && us > 0 ? fmt::format(", {:.2f} GB/s", *bytes / (us * 1e3)) : "");
}

// Level 4: the loaded code as llvm-objdump sees it, fed on stdin.
void log_disassembly(const ProgramSpec& spec, const std::vector<std::byte>& image) {
  std::optional<std::string> objdump = find_executable("llvm-objdump-19");
  if (!objdump) objdump = find_executable("llvm-objdump");
  if (!objdump) {
    log_debug("disassembly of {}: no llvm-objdump-19 or llvm-objdump in PATH", spec.display_name());
    return;
  }
  const std::string_view bytes(reinterpret_cast<const char*>(image.data()), image.size());
  const ProcessResult r = run_process({*objdump, "-d", "-"}, bytes, std::chrono::seconds(30));
  if (!r.ok()) {
    log_debug("disassembly of {}: {} failed: {}", spec.display_name(), *objdump, r.err);
    return;
  }
  log_debug("disassembly of {}:\n{}", spec.display_name(), r.out);
}

// Out of line and cold: a launch under SVOD_OP_TIMEOUT's deadline (unless
// the plan op that runs it has one) and/or logged.
[[gnu::noinline, gnu::cold]] void run_watched(const CpuProgram& program, const uint64_t* args, int64_t slices) {
  std::optional<OpDeadline> deadline;
  if (op_timeout_seconds() > 0) deadline.emplace(op_title({}, OpKind::Kernel, program.spec().display_name()));
  if (launch_debug_level >= 2)
    run_logged(program, args, slices);
  else
    run_slices(program, args, slices);
}

}  // namespace

void CpuProgram::run_bound(const uint64_t* args, int64_t slices) const {
  note_launched(code_tag_);
  if (slow_launches.load(std::memory_order_relaxed)) [[unlikely]] {
    run_watched(*this, args, slices);
    return;
  }
  run_slices(*this, args, slices);
}

CpuDevice::CpuDevice(std::shared_ptr<const Compiler> compiler) : compiler_(std::move(compiler)) {}

Buffer CpuDevice::allocate(DType dtype, size_t count) { return allocate_host_buffer(*this, dtype, count); }

void CpuDevice::copy(const Buffer& dst, const Buffer& src) { copy_host_buffers(dst, src); }

std::span<const Language> CpuDevice::languages() const noexcept {
  static constexpr Language kLanguages[] = {Language::C, Language::LlvmIr};
  return kLanguages;
}

std::shared_ptr<const Program> CpuDevice::load(const ProgramSpec& spec, const Artifact& artifact) {
  spec.validate();
  route_kernel_exits();  // before the loader resolves the kernel's calls
  route_kernel_signal_calls();
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
  throw make_error(ErrorKind::Load, "program \"{}\": the CPU device loads ELF objects and shared libraries",
                   spec.display_name());
}

std::string CpuDevice::artifact_mismatch(const CompilerIdentity& id) const {
  const std::string arch = id.target_triple.substr(0, id.target_triple.find('-'));
  if (arch != host_arch()) return fmt::format("they are for {}, this machine is {}", id.target_triple, host_arch());
  if (id.abi_version != CompilerIdentity{}.abi_version)
    return fmt::format("they use svod object ABI {}, this svod loads ABI {}", id.abi_version,
                       CompilerIdentity{}.abi_version);
  const auto missing = missing_cpu_features(id.target_features);
  if (missing.empty()) return {};
  std::string names;
  for (const auto& m : missing) names += (names.empty() ? "" : ", ") + m;
  return fmt::format("they need {}, which this CPU lacks; they were compiled for CPU {}", names, id.target_cpu);
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

std::shared_ptr<CpuDevice> cpu_device(CpuCompiler compiler) {
  static std::mutex mutex;
  static std::shared_ptr<CpuDevice> devices[3];
  std::lock_guard lock(mutex);
  auto& device = devices[static_cast<size_t>(compiler)];
  if (!device) {
    device = std::make_shared<CpuDevice>(cpu_compiler(compiler));
    // In the background, for the device's parallel launches; each worker
    // started ahead is set up for kernels as it starts.
    start_thread_pool(&detail::prepare_thread_for_kernels);
  }
  return device;
}

std::shared_ptr<CpuDevice> cpu_device() { return cpu_device(default_cpu_compiler().compiler); }

DeviceKind cpu_device_kind() {
  DeviceKind kind;
  kind.name = "CPU";
  kind.indexed = false;
  kind.enumerate = [] { return std::vector<DeviceInfo>{{"CPU", "host memory; kernels in C or LLVM IR"}}; };
  kind.create = [](size_t) -> std::shared_ptr<Device> { return cpu_device(); };
  for (CpuCompiler b : {CpuCompiler::Llvm, CpuCompiler::Clang, CpuCompiler::Dlopen})
    kind.compilers.emplace_back(to_string(b));
  kind.create_with_compiler = [](size_t, std::string_view compiler) -> std::shared_ptr<Device> {
    return cpu_device(parse_cpu_compiler(compiler));
  };
  return kind;
}

}  // namespace svod
