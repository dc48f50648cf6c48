// The CUDA device itself: opening it (its driver state), memory, programs
// loaded as modules, synchronous copies and the staging behind them, and the
// registry's "CUDA" kind. Launches are in cuda_queue.cpp, graphs in
// cuda_graph.cpp.
#include "svod/backends/cuda/cuda_device.h"

#include <algorithm>
#include <cstring>

#include "svod/base/error.h"
#include "svod/base/log.h"
#include "svod/backends/cuda/cuda_internal.h"
#include "svod/backends/cuda/nvrtc_compiler.h"

namespace svod {

using detail::check_cu;
using detail::cuda_driver;

namespace {

// Bytes per pinned staging half: large enough that the per-chunk driver
// overhead vanishes against the transfer, small enough to stay resident.
constexpr size_t kStagingBytes = size_t{8} << 20;

std::string describe(const CudaDeviceDetails& d) {
  return fmt::format("{} (sm_{}{}), {} SMs, {} MiB, driver {}.{}", d.name, d.compute_major, d.compute_minor,
                     d.multiprocessors, d.global_memory >> 20, d.driver_version / 1000, d.driver_version % 1000 / 10);
}

CudaDeviceDetails query(const detail::CudaDriverApi& api, cu::CUdevice device) {
  CudaDeviceDetails d;
  char name[256] = {};
  if (api.cuDeviceGetName(name, sizeof(name) - 1, device) == cu::CUDA_SUCCESS) d.name = name;
  api.cuDeviceGetAttribute(&d.compute_major, cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  api.cuDeviceGetAttribute(&d.compute_minor, cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  api.cuDeviceGetAttribute(&d.multiprocessors, cu::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
  api.cuDeviceGetAttribute(&d.max_threads_per_block, cu::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, device);
  size_t bytes = 0;
  if (api.cuDeviceTotalMem(&bytes, device) == cu::CUDA_SUCCESS) d.global_memory = bytes;
  d.driver_version = api.driver_version;
  return d;
}

int device_count(const detail::CudaDriverApi& api) {
  int count = 0;
  check_cu(api.cuDeviceGetCount(&count), "cuDeviceGetCount", ErrorKind::DeviceUnavailable);
  return count;
}

}  // namespace

// ---- storage -------------------------------------------------------------------

CudaStorage::CudaStorage(CudaDevice& device, size_t bytes, cu::CUdeviceptr pointer)
    : Storage(device, bytes), pointer_(pointer) {}

CudaStorage::~CudaStorage() {
  // Errors are ignored: at process exit the driver may already be shut down.
  const auto& state = static_cast<CudaDevice&>(device()).state();
  state.make_current();
  state.api.cuMemFree(pointer_);
}

CudaPinnedStorage::CudaPinnedStorage(CudaDevice& device, size_t bytes, void* host) : Storage(device, bytes, host) {}

CudaPinnedStorage::~CudaPinnedStorage() {
  const auto& state = static_cast<CudaDevice&>(device()).state();
  state.make_current();
  state.api.cuMemFreeHost(host_data());
}

// ---- the driver state --------------------------------------------------------------

namespace detail {

CudaDeviceState::CudaDeviceState(CudaDevice& owner, size_t index)
    : owner(owner), api(cuda_driver()), queue(owner) {
  const int count = device_count(api);
  if (index >= static_cast<size_t>(count))
    throw make_error(ErrorKind::DeviceUnavailable, "CUDA:{}: this machine has {} CUDA device(s)", index, count);
  check_cu(api.cuDeviceGet(&device, static_cast<int>(index)), fmt::format("CUDA:{}: cuDeviceGet", index),
           ErrorKind::DeviceUnavailable);
  check_cu(api.cuDevicePrimaryCtxRetain(&context, device),
           fmt::format("CUDA:{}: retaining the primary context", index), ErrorKind::DeviceUnavailable);
  make_current();
  // Non-blocking: svod's stream does not wait for work other code puts on the
  // legacy default stream.
  const cu::CUresult status = api.cuStreamCreate(&stream, cu::CU_STREAM_NON_BLOCKING);
  if (status != cu::CUDA_SUCCESS) {
    api.cuDevicePrimaryCtxRelease(device);
    check_cu(status, fmt::format("CUDA:{}: creating a stream", index), ErrorKind::DeviceUnavailable);
  }
}

CudaDeviceState::~CudaDeviceState() {
  // Registry devices are destroyed at process exit, when the driver may have
  // shut down already: then nothing is released (the process is ending).
  if (api.cuCtxSetCurrent(context) != cu::CUDA_SUCCESS) return;
  api.cuStreamSynchronize(stream);
  graphs.clear();
  for (size_t i = 0; i < 2; ++i) {
    if (staging_done_[i]) api.cuEventDestroy(staging_done_[i]);
    if (staging_[i]) api.cuMemFreeHost(staging_[i]);
  }
  api.cuStreamDestroy(stream);
  api.cuDevicePrimaryCtxRelease(device);
}

void CudaDeviceState::wait_stream(std::string_view what) const {
  check_cu(api.cuStreamSynchronize(stream), fmt::format("{} failed on {}", what, owner.name()));
}

bool CudaDeviceState::owns(const Buffer& buffer) const noexcept {
  return buffer.valid() && &buffer.device() == &owner && dynamic_cast<const CudaStorage*>(&buffer.storage());
}

cu::CUdeviceptr CudaDeviceState::pointer_of(const Buffer& buffer, std::string_view what) const {
  const auto* storage = dynamic_cast<const CudaStorage*>(&buffer.storage());
  if (!storage || &storage->device() != &owner)
    throw make_error(ErrorKind::Validation, "{} is on {}; {} takes buffers in its own memory (copy it first)", what,
                     buffer.device().name(), owner.name());
  return storage->pointer() + buffer.byte_offset();
}

void CudaDeviceState::ensure_staging() {
  for (size_t i = 0; i < 2; ++i) {
    if (!staging_[i])
      check_cu(api.cuMemHostAlloc(&staging_[i], kStagingBytes, cu::CU_MEMHOSTALLOC_PORTABLE),
               fmt::format("{}: allocating a pinned staging buffer", owner.name()));
    if (!staging_done_[i])
      check_cu(api.cuEventCreate(&staging_done_[i], cu::CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  }
}

void CudaDeviceState::upload(cu::CUdeviceptr dst, const void* src, size_t bytes) {
  std::lock_guard lock(staging_mutex_);
  ensure_staging();
  // Chunk k is copied into half k % 2 once that half's previous transfer
  // finished, so the memcpy of one chunk overlaps the DMA of the other.
  const auto* from = static_cast<const std::byte*>(src);
  for (size_t offset = 0, k = 0; offset < bytes; offset += kStagingBytes, ++k) {
    const size_t half = k % 2;
    const size_t n = std::min(kStagingBytes, bytes - offset);
    if (k >= 2)
      check_cu(api.cuEventSynchronize(staging_done_[half]), fmt::format("{}: host-to-device copy", owner.name()));
    std::memcpy(staging_[half], from + offset, n);
    check_cu(api.cuMemcpyHtoDAsync(dst + offset, staging_[half], n, stream),
             fmt::format("{}: copying {} bytes to the device", owner.name(), n));
    check_cu(api.cuEventRecord(staging_done_[half], stream), "cuEventRecord");
  }
  wait_stream("a host-to-device copy");
}

void CudaDeviceState::download(void* dst, cu::CUdeviceptr src, size_t bytes) {
  std::lock_guard lock(staging_mutex_);
  ensure_staging();
  auto* to = static_cast<std::byte*>(dst);
  const size_t chunks = (bytes + kStagingBytes - 1) / kStagingBytes;
  auto issue = [&](size_t k) {
    const size_t offset = k * kStagingBytes;
    const size_t n = std::min(kStagingBytes, bytes - offset);
    check_cu(api.cuMemcpyDtoHAsync(staging_[k % 2], src + offset, n, stream),
             fmt::format("{}: copying {} bytes to the host", owner.name(), n));
    check_cu(api.cuEventRecord(staging_done_[k % 2], stream), "cuEventRecord");
  };
  // The transfer of chunk k + 1 runs while chunk k is copied out.
  if (chunks > 0) issue(0);
  for (size_t k = 0; k < chunks; ++k) {
    if (k + 1 < chunks) issue(k + 1);
    check_cu(api.cuEventSynchronize(staging_done_[k % 2]),
             fmt::format("{}: device-to-host copy failed", owner.name()));
    const size_t offset = k * kStagingBytes;
    std::memcpy(to + offset, staging_[k % 2], std::min(kStagingBytes, bytes - offset));
  }
}

}  // namespace detail

// ---- CudaDevice --------------------------------------------------------------------

CudaDevice::CudaDevice(size_t index)
    : index_(index),
      state_(std::make_unique<detail::CudaDeviceState>(*this, index)),
      details_(query(state_->api, state_->device)) {}

CudaDevice::~CudaDevice() { free_cached(); }  // its storages free through the driver state

std::string CudaDevice::name() const { return fmt::format("CUDA:{}", index_); }

Queue& CudaDevice::queue() { return state_->queue; }

Buffer CudaDevice::allocate(DType dtype, size_t count) {
  const size_t bytes = checked_byte_size(dtype, count);
  const size_t allocated = std::max<size_t>(bytes, 1);  // cuMemAlloc refuses 0 bytes
  const auto& state = *state_;
  state.make_current();
  cu::CUdeviceptr pointer = 0;
  check_cu(state.api.cuMemAlloc(&pointer, allocated), fmt::format("{}: allocating {} bytes", name(), bytes));
  auto storage = std::make_shared<CudaStorage>(*this, bytes, pointer);
  check_cu(state.api.cuMemsetD8Async(pointer, 0, allocated, state.stream),
           fmt::format("{}: zero-filling {} bytes", name(), bytes));
  state.wait_stream("zero-filling a new buffer");
  return Buffer(std::move(storage), dtype);
}

Buffer CudaDevice::allocate_host(DType dtype, size_t count) {
  const size_t bytes = checked_byte_size(dtype, count);
  state_->make_current();
  void* host = nullptr;
  check_cu(state_->api.cuMemHostAlloc(&host, std::max<size_t>(bytes, 1), cu::CU_MEMHOSTALLOC_PORTABLE),
           fmt::format("{}: allocating {} bytes of pinned host memory", name(), bytes));
  std::memset(host, 0, bytes);
  return Buffer(std::make_shared<CudaPinnedStorage>(*this, bytes, host), dtype);
}

std::span<const Language> CudaDevice::languages() const noexcept {
  static constexpr Language kLanguages[] = {kCudaLanguage};
  return kLanguages;
}

const Compiler& CudaDevice::compiler() const {
  std::lock_guard lock(compiler_mutex_);
  if (!compiler_)
    compiler_ = std::make_shared<NvrtcCompiler>(cuda_sm_target(details_.compute_major, details_.compute_minor));
  return *compiler_;
}

void CudaDevice::check_spec(const ProgramSpec& spec) const {
  if (spec.core_id_index())
    throw make_error(ErrorKind::Validation,
                     "program \"{}\": core_id is the CPU's slice index; CUDA kernels use blockIdx and threadIdx instead",
                     spec.display_name());
}

std::string CudaDevice::artifact_mismatch(const CompilerIdentity& made_by) const {
  // A cubin runs on the architecture it was built for; the driver, not
  // NVRTC, loads it, so which NVRTC made it does not matter.
  const std::string here = cuda_sm_target(details_.compute_major, details_.compute_minor);
  if (made_by.name != "nvrtc" || made_by.target_cpu != here || made_by.abi_version != CompilerIdentity{}.abi_version)
    return fmt::format("they were built by {} for {}, and {} is {} ({})", made_by.name, made_by.target_cpu, name(),
                       here, details_.name);
  return {};
}

std::shared_ptr<const Program> CudaDevice::load(const ProgramSpec& spec, const Artifact& artifact) {
  if (artifact.kind != kPtx && artifact.kind != kCubin)
    throw make_error(ErrorKind::Load, "program \"{}\": {} loads PTX or cubins", spec.display_name(), name());
  const auto& api = state_->api;
  state_->make_current();
  cu::CUmodule module = nullptr;
  check_cu(api.cuModuleLoadData(&module, artifact.bytes.data()),
           fmt::format("program \"{}\": loading its {} on {} ({})", spec.display_name(),
                       artifact.kind == kPtx ? "PTX" : "cubin", name(), details_.name),
           ErrorKind::Load);
  cu::CUfunction function = nullptr;
  const cu::CUresult status = api.cuModuleGetFunction(&function, module, spec.entry.c_str());
  if (status != cu::CUDA_SUCCESS) {
    api.cuModuleUnload(module);
    if (status == cu::CUDA_ERROR_NOT_FOUND)
      throw make_error(ErrorKind::UndefinedSymbol,
                       "program \"{}\" has no kernel named \"{}\" (declare it extern \"C\" __global__ so its name is "
                       "not mangled)",
                       spec.display_name(), spec.entry);
    check_cu(status, fmt::format("program \"{}\": cuModuleGetFunction", spec.display_name()), ErrorKind::Load);
  }
  if (debug_level() >= 1) log_debug("loaded CUDA program {} on {}", spec.display_name(), name());
  return std::make_shared<CudaProgram>(*this, spec, module, function);
}

bool CudaDevice::direct_copy(const Buffer& dst, const Buffer& src) const noexcept {
  if (!dst.valid() || !src.valid() || dst.bytes() != src.bytes()) return false;
  const bool dst_here = state_->owns(dst), src_here = state_->owns(src);
  return (dst_here && (src_here || src.is_host())) || (src_here && dst.is_host());
}

void CudaDevice::copy(const Buffer& dst, const Buffer& src) {
  if (dst.bytes() != src.bytes())
    throw make_error(ErrorKind::Validation, "copy of {} bytes into a buffer of {} bytes: sizes must be equal",
                     src.bytes(), dst.bytes());
  const size_t bytes = src.bytes();
  if (bytes == 0) return;
  auto& state = *state_;
  const bool dst_here = state.owns(dst);
  const bool src_here = state.owns(src);
  const auto& api = state.api;
  if (dst_here || src_here) state.make_current();
  if (dst_here && src_here && (&dst.storage() != &src.storage() || !dst.overlaps(src))) {
    check_cu(api.cuMemcpyDtoDAsync(state.pointer_of(dst, "copy destination"), state.pointer_of(src, "copy source"),
                                   bytes, state.stream),
             fmt::format("{}: copying {} bytes within the device", name(), bytes));
    state.wait_stream("a device-to-device copy");
    return;
  }
  const bool pinned_src = dynamic_cast<const CudaPinnedStorage*>(&src.storage()) != nullptr;
  const bool pinned_dst = dynamic_cast<const CudaPinnedStorage*>(&dst.storage()) != nullptr;
  if (dst_here && src.is_host()) {
    if (pinned_src) {
      check_cu(api.cuMemcpyHtoDAsync(state.pointer_of(dst, "copy destination"), src.data(), bytes, state.stream),
               fmt::format("{}: copying {} bytes from pinned memory", name(), bytes));
      state.wait_stream("a host-to-device copy");
    } else {
      state.upload(state.pointer_of(dst, "copy destination"), src.data(), bytes);
    }
    return;
  }
  if (src_here && dst.is_host()) {
    if (pinned_dst) {
      check_cu(api.cuMemcpyDtoHAsync(dst.data(), state.pointer_of(src, "copy source"), bytes, state.stream),
               fmt::format("{}: copying {} bytes to pinned memory", name(), bytes));
      state.wait_stream("a device-to-host copy");
    } else {
      state.download(dst.data(), state.pointer_of(src, "copy source"), bytes);
    }
    return;
  }
  copy_through_host(dst, src);
}

void CudaDevice::synchronize() {
  state_->make_current();
  state_->wait_stream("work on the stream");
}

void* CudaDevice::enter_stream() {
  state_->make_current();
  return state_->stream;
}

void* CudaDevice::device_address(const Buffer& buffer) const noexcept {
  if (!state_->owns(buffer)) return nullptr;
  return reinterpret_cast<void*>(static_cast<uintptr_t>(state_->pointer_of(buffer, "a native stream's operand")));
}

void CudaDevice::wait_stream(std::string_view what, const std::function<void()>& poll) {
  const detail::CudaDriverApi& api = state_->api;
  state_->make_current();
  cu::CUevent done = nullptr;
  detail::check_cu(api.cuEventCreate(&done, cu::CU_EVENT_DISABLE_TIMING), fmt::format("{} on {}: an event", what, name()));
  const std::unique_ptr<std::remove_pointer_t<cu::CUevent>, void (*)(cu::CUevent)> owned(done, [](cu::CUevent e) {
    cuda_driver().cuEventDestroy(e);
  });
  detail::check_cu(api.cuEventRecord(done, state_->stream), fmt::format("{} on {}: recording an event", what, name()));
  for (;;) {
    const cu::CUresult status = api.cuEventQuery(done);
    if (status == cu::CUDA_SUCCESS) return;
    if (status != cu::CUDA_ERROR_NOT_READY) detail::check_cu(status, fmt::format("{} on {}", what, name()));
    poll();
  }
}

std::vector<DeviceInfo> enumerate_cuda_devices() {
  const auto& api = cuda_driver();
  const int count = device_count(api);
  std::vector<DeviceInfo> out;
  for (int i = 0; i < count; ++i) {
    cu::CUdevice device = 0;
    check_cu(api.cuDeviceGet(&device, i), fmt::format("CUDA:{}: cuDeviceGet", i), ErrorKind::DeviceUnavailable);
    out.push_back({fmt::format("CUDA:{}", i), describe(query(api, device))});
  }
  return out;
}

DeviceKind cuda_device_kind() {
  DeviceKind kind;
  kind.name = "CUDA";
  kind.enumerate = enumerate_cuda_devices;
  kind.create = [](size_t index) -> std::shared_ptr<Device> { return std::make_shared<CudaDevice>(index); };
  // CUDA C compiles without a GPU; the devices need the driver.
  kind.toolchain = []() -> std::string {
    try {
      const auto& nvrtc = detail::nvrtc_api();
      return fmt::format("nvrtc: {}.{} ({})", nvrtc.major, nvrtc.minor, nvrtc.path);
    } catch (const Error& e) {
      return fmt::format("nvrtc: none ({})", e.what());
    }
  };
  return kind;
}

}  // namespace svod
